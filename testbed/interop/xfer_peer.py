#!/usr/bin/python3
"""xfer_peer.py -- the Linux side of wharf's TCP interop tests (testbed/tests/t_tcp_*.sh).

Linux's own TCP (plain sockets) talking to a wharf node, standard library only:

  xfer_peer.py echo --bind IP --port P [--seconds S]
      A raw echo server: every byte received on a connection is written back on it.
      Serves until SIGTERM/SIGINT or S seconds, then prints one JSON line with counts.

  xfer_peer.py client --host IP --port P [--connections C] [--bytes N] [--seed S]
                      [--min-size B] [--max-size B] [--seconds LIMIT]
      Opens C connections to a wharf echo server (wharf-xfer --server --echo). On each it
      sends N random bytes framed as wharf messages (the 32-byte little-endian header of
      transport/tl_wire.h, bodies of seeded log-uniform sizes) while reading the echoes,
      and checks that what comes back is byte for byte what was sent (headers included).
      Prints one JSON line with the SHA-256 of all bodies sent and of all bodies received
      (over the connections in order), and exits 0 only when every connection matched.

  xfer_peer.py sink --bind IP --port P [--seconds S]
      Accepts one connection and reads it with blocking recv() calls (SO_RCVTIMEO bounds
      each by what is left of S seconds) until end-of-file, an error or the time is up.
      Prints one JSON line: bytes read, how the stream ended ("eof"; "reset" for
      ECONNRESET; "timeout"; "error" with its errno name) and how long the last recv()
      had been blocked when it returned. For a peer that resets the connection while
      this side waits in recv() (testbed/tests/t_tcp_tap_abort.sh).

Exit status: 0 ok (sink: the stream ended, by end-of-file or reset), 1 a check failed or
time ran out, 2 bad arguments.
"""
import argparse
import errno
import hashlib
import json
import math
import random
import selectors
import signal
import socket
import struct
import sys
import threading
import time

MAGIC, VERSION, TYPE = 0x4657, 1, 201  # tl_wire.h; 201 is wharf-xfer's message type
HDR = struct.Struct("<HBBHHIIQII")      # magic ver type flags aux body_len table_id req_id keys dim
assert HDR.size == 32


def log_uniform(rng, lo, hi):
    """A size in [lo, hi], log-uniform (as wharf-xfer draws its sizes)."""
    return min(hi, lo + int(math.exp(rng.random() * math.log(hi - lo + 1))) - 1)


class Conn:
    """One client connection: its whole framed stream, and how far it got each way."""

    def __init__(self, idx, nconns, nbytes, seed, lo, hi):
        rng = random.Random(seed * 1000003 + idx)
        body = rng.randbytes(nbytes)
        parts, off, i = [], 0, 0
        self.body_sha = hashlib.sha256(body)
        while off < nbytes:
            n = min(log_uniform(rng, lo, hi), nbytes - off)
            parts.append(HDR.pack(MAGIC, VERSION, TYPE, 0, 0, n, idx, i, nconns, 0))
            parts.append(body[off:off + n])
            off += n
            i += 1
        self.msgs = i
        self.out = memoryview(b"".join(parts))
        self.sent = 0
        self.recv = 0
        self.bad_at = None        # first stream offset where the echo differed
        self.rx_hdr = bytearray()  # parser state for the received bodies' hash
        self.rx_left = 0
        self.rx_body_sha = hashlib.sha256()
        self.sock = None

    def feed(self, data):
        """Checks echoed bytes against what was sent there, and hashes the bodies."""
        end = self.recv + len(data)
        if self.bad_at is None and (end > len(self.out) or self.out[self.recv:end] != data):
            self.bad_at = self.recv
        self.recv = end
        view, pos = memoryview(data), 0
        while pos < len(view):
            if self.rx_left == 0:
                take = min(32 - len(self.rx_hdr), len(view) - pos)
                self.rx_hdr += view[pos:pos + take]
                pos += take
                if len(self.rx_hdr) == 32:
                    self.rx_left = HDR.unpack(bytes(self.rx_hdr))[5]
                    self.rx_hdr.clear()
                continue
            take = min(self.rx_left, len(view) - pos)
            self.rx_body_sha.update(view[pos:pos + take])
            self.rx_left -= take
            pos += take

    def done(self):
        return self.recv >= len(self.out)


def close_gracefully(conns, sel, deadline):
    """Our FIN on every complete connection, then its FIN back (end of file), for at most 5 s
    past the deadline: so wharf has answered every close before this process exits and the
    test stops the server. Returns (connections closed by a FIN, connections reset)."""
    waiting = []
    for c in conns:
        if not c.done():
            continue
        try:
            c.sock.shutdown(socket.SHUT_WR)
        except OSError:
            continue
        sel.register(c.sock, selectors.EVENT_READ, c)
        waiting.append(c)
    fins = resets = 0
    until = max(deadline, time.monotonic()) + 5
    while waiting and time.monotonic() < until:
        for key, _ in sel.select(timeout=0.2):
            c = key.data
            try:
                if c.sock.recv(1 << 16):
                    continue  # nothing more is due; read on to the end of the stream
                fins += 1
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                resets += 1
            sel.unregister(c.sock)
            waiting.remove(c)
    return fins, resets


def run_client(a):
    conns = [Conn(i, a.connections, a.bytes, a.seed, a.min_size, a.max_size)
             for i in range(a.connections)]
    sel = selectors.DefaultSelector()
    t0 = time.monotonic()
    deadline = t0 + a.seconds
    for c in conns:
        c.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        c.sock.setblocking(False)
        c.sock.connect_ex((a.host, a.port))
        sel.register(c.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
    errors, live = [], len(conns)
    while live > 0 and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=0.2):
            c = key.data
            try:
                if ev & selectors.EVENT_WRITE and c.sent < len(c.out):
                    c.sent += c.sock.send(c.out[c.sent:c.sent + (1 << 20)])
                    if c.sent == len(c.out):
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                if ev & selectors.EVENT_READ:
                    data = c.sock.recv(1 << 20)
                    if not data:
                        raise ConnectionError("closed by wharf before the echo was complete")
                    c.feed(data)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError as e:
                errors.append("connection %d: %s" % (conns.index(c), e))
                sel.unregister(c.sock)
                live -= 1
                continue
            if c.done():
                sel.unregister(c.sock)
                live -= 1
    secs = time.monotonic() - t0
    fins, resets = close_gracefully(conns, sel, deadline)
    for c in conns:
        c.sock.close()
    sent_sha, recv_sha = hashlib.sha256(), hashlib.sha256()
    for c in conns:
        sent_sha.update(c.body_sha.digest())
        recv_sha.update(c.rx_body_sha.digest())
    mismatched = sum(1 for c in conns if c.bad_at is not None or not c.done())
    total = sum(len(c.out) for c in conns)
    res = {
        "role": "linux-client", "connections": len(conns), "msgs": sum(c.msgs for c in conns),
        "bytes_sent": sum(c.sent for c in conns), "bytes_received": sum(c.recv for c in conns),
        "bytes_expected": total, "mismatched_connections": mismatched,
        "first_bad_offset": next((c.bad_at for c in conns if c.bad_at is not None), None),
        "sha256_sent": sent_sha.hexdigest(), "sha256_received": recv_sha.hexdigest(),
        "seconds": round(secs, 3), "gbit_per_s": round(total * 8 / max(secs, 1e-9) / 1e9, 4),
        "errors": errors[:5], "timed_out": live > 0,
        "closed_by_fin": fins, "reset_at_close": resets,
    }
    res["ok"] = mismatched == 0 and not errors and live == 0 and \
        res["sha256_sent"] == res["sha256_received"]
    print(json.dumps(res), flush=True)
    return 0 if res["ok"] else 1


def run_echo(a):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((a.bind, a.port))
    lst.listen(256)
    lst.settimeout(0.2)
    stop = threading.Event()
    stats = {"connections": 0, "bytes": 0, "errors": 0, "eof": 0, "reset": 0}
    lock = threading.Lock()

    def serve(s):
        n = 0
        end = "reset"
        try:
            while True:
                data = s.recv(1 << 20)
                if not data:
                    end = "eof"  # wharf-xfer closes gracefully once it has every echo back
                    break
                s.sendall(data)
                n += len(data)
        except OSError:
            pass
        finally:
            s.close()
            with lock:
                stats["bytes"] += n
                stats[end] += 1

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print("xfer_peer: echo server on %s:%d" % (a.bind, a.port), file=sys.stderr, flush=True)
    end = time.monotonic() + a.seconds
    while not stop.is_set() and time.monotonic() < end:
        try:
            s, _ = lst.accept()
        except socket.timeout:
            continue
        except OSError:
            stats["errors"] += 1
            continue
        stats["connections"] += 1
        threading.Thread(target=serve, args=(s,), daemon=True).start()
    lst.close()
    time.sleep(0.2)
    with lock:
        print(json.dumps({"role": "linux-echo", **stats}), flush=True)
    return 0


def run_sink(a):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind((a.bind, a.port))
    lst.listen(1)
    print("xfer_peer: sink on %s:%d" % (a.bind, a.port), file=sys.stderr, flush=True)
    deadline = time.monotonic() + a.seconds
    res = {"role": "linux-sink", "connections": 0, "bytes": 0, "end": "timeout",
           "errno": None, "last_recv_blocked_s": None}
    lst.settimeout(a.seconds)
    try:
        s, _ = lst.accept()
    except socket.timeout:
        lst.close()
        print(json.dumps(res), flush=True)
        return 1
    lst.close()
    res["connections"] = 1
    s.settimeout(None)  # blocking: each recv() below waits in the kernel
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO,
                     struct.pack("ll", int(left), int((left % 1) * 1e6)))
        t0 = time.monotonic()
        try:
            data = s.recv(1 << 20)
        except OSError as e:
            res["last_recv_blocked_s"] = round(time.monotonic() - t0, 3)
            res["errno"] = errno.errorcode.get(e.errno, str(e.errno))
            res["end"] = {errno.EAGAIN: "timeout", errno.ECONNRESET: "reset"}.get(e.errno, "error")
            break
        res["last_recv_blocked_s"] = round(time.monotonic() - t0, 3)
        if not data:
            res["end"] = "eof"
            break
        res["bytes"] += len(data)
    s.close()
    print(json.dumps(res), flush=True)
    return 0 if res["end"] in ("eof", "reset") else 1


def positive(s):
    v = int(s, 0)
    if v < 1:
        raise argparse.ArgumentTypeError("must be at least 1, got %s" % s)
    return v


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("echo")
    e.add_argument("--bind", required=True)
    e.add_argument("--port", type=positive, required=True)
    e.add_argument("--seconds", type=float, default=3600)
    k = sub.add_parser("sink")
    k.add_argument("--bind", required=True)
    k.add_argument("--port", type=positive, required=True)
    k.add_argument("--seconds", type=float, default=60)
    c = sub.add_parser("client")
    c.add_argument("--host", required=True)
    c.add_argument("--port", type=positive, required=True)
    c.add_argument("--connections", type=positive, default=1)
    c.add_argument("--bytes", type=positive, default=1 << 20, help="random bytes per connection")
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--min-size", type=positive, default=1)
    c.add_argument("--max-size", type=positive, default=1 << 20)
    c.add_argument("--seconds", type=float, default=120)
    a = p.parse_args()
    if a.cmd == "client" and (a.min_size > a.max_size or a.max_size > 64 << 20):
        p.error("--min-size/--max-size: need 1 <= min <= max <= 67108864")
    return {"client": run_client, "echo": run_echo, "sink": run_sink}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
