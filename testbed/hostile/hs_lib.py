"""hs_lib.py -- shared pieces of the hostile-traffic tests (testbed/hostile/hostile.py).

Sits between the test scripts (testbed/tests/t_hostile_*.sh -> hostile.py PHASE) and the
wire: a legitimate Linux client whose echoed stream is checked byte for byte (Live), a
sniffer that follows the live connection's sequence numbers on the TAP and records what
the wharf node sends (Tap), a raw AF_PACKET sender, and the parser of the counters a
wharf node prints when it exits with WHARF_TL_STATS=1.

Why a byte-exact stream: every injected segment in these tests would, if a layer wrongly
accepted it, either reset the live connection or put foreign bytes into its stream. The
echo comparison catches the second; the RST watch and the client's socket catch the first.

Runs under Debian's /usr/bin/python3 with scapy 2.5 (python3-scapy, testbed/deps.sh).
"""
import bisect
import hashlib
import math
import random
import re
import selectors
import socket
import struct
import threading
import time

from scapy.all import IP, TCP, AsyncSniffer, conf

conf.verb = 0

MAGIC, VERSION, TYPE = 0x4657, 1, 200  # transport/tl_wire.h; 200 is wharf-perf's type
HDR = struct.Struct("<HBBHHIIQII")      # magic ver type flags aux body_len table_id req_id keys dim
assert HDR.size == 32

M32 = 1 << 32


def seq_add(a, n):
    return (a + n) % M32


def seq_diff(a, b):
    """a - b as a signed 32-bit sequence distance."""
    d = (a - b) % M32
    return d - M32 if d >= 1 << 31 else d


def framed_stream(nbytes, seed, max_body=16384):
    """nbytes of wharf messages (32-byte tl_wire header + random body), deterministic."""
    rng = random.Random(seed)
    parts, ends, total = [], [], 0
    while total < nbytes:
        n = min(max_body, int(math.exp(rng.random() * math.log(max_body))))
        parts.append(HDR.pack(MAGIC, VERSION, TYPE, 0, 0, n, 7, len(ends), 0, 0))
        parts.append(rng.randbytes(n))
        total += 32 + n
        ends.append(total)
    return b"".join(parts), ends


class Live(threading.Thread):
    """A legitimate client on a Linux socket, echoing through wharf-perf --server --echo.

    The main thread says how far the client may send (allow); the client's thread sends
    up to there and checks every echoed byte against what it sent at that offset. Between
    allow() calls the connection is quiet, so the sequence numbers the sniffer saw last
    are the connection's real state: that is when the injections happen.
    """

    def __init__(self, host, port, nbytes, seed, maxseg=None, rcvbuf=None, read=True):
        super().__init__(daemon=True)
        self.out, self.ends = framed_stream(nbytes, seed)
        self.limit = 0
        self.sent = 0
        self.recv = 0
        self.bad_at = None
        self.bad_detail = None
        self.rx = bytearray()      # the echoed stream, kept for the diagnosis of a mismatch
        self.error = None
        self.read = read
        self.rx_sha = hashlib.sha256()
        self.lock = threading.Condition()
        self.stop = False
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if maxseg:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, maxseg)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect((host, port))
        self.sock.setblocking(False)
        self.lport = self.sock.getsockname()[1]

    def allow(self, n):
        """Lets the client send up to byte n of its stream (absolute offset), rounded up to
        the end of a message: the echo server answers whole messages only."""
        i = bisect.bisect_left(self.ends, min(n, len(self.out)))
        with self.lock:
            self.limit = max(self.limit, self.ends[min(i, len(self.ends) - 1)])
            self.lock.notify_all()

    def set_read(self, on):
        with self.lock:
            self.read = on
            self.lock.notify_all()

    def wait_echoed(self, timeout):
        """True when everything allowed so far was sent and came back."""
        end = time.monotonic() + timeout
        with self.lock:
            while time.monotonic() < end and self.error is None and \
                    not (self.sent == self.limit and self.recv >= self.limit):
                self.lock.wait(0.05)
            return self.error is None and self.sent == self.limit and self.recv >= self.limit

    def _feed(self, data):
        end = self.recv + len(data)
        if self.bad_at is None and (end > self.sent or self.out[self.recv:end] != data):
            self.bad_at = self.recv
            i = next((k for k in range(len(data)) if self.out[self.recv + k] != data[k]), 0)
            self.bad_detail = "at %d: expected %s got %s" % (
                self.recv + i, self.out[self.recv + i:self.recv + i + 24].hex(),
                data[i:i + 24].hex())
        self.rx_sha.update(data)
        self.rx += data
        self.recv = end

    def run(self):
        sel = selectors.DefaultSelector()
        sel.register(self.sock, selectors.EVENT_READ)
        try:
            while not self.stop:
                with self.lock:
                    limit, read = self.limit, self.read
                if self.sent < limit:
                    try:
                        n = self.sock.send(self.out[self.sent:min(limit, self.sent + 65536)])
                        with self.lock:
                            self.sent += n
                    except BlockingIOError:
                        pass
                if not read:
                    time.sleep(0.01)
                    continue
                for _key, _ev in sel.select(timeout=0.01):
                    try:
                        data = self.sock.recv(1 << 20)
                    except BlockingIOError:
                        continue
                    if not data:
                        raise ConnectionError("closed by the wharf node")
                    with self.lock:
                        self._feed(data)
                        self.lock.notify_all()
        except OSError as e:
            with self.lock:
                self.error = "%s: %s" % (type(e).__name__, e)
                self.lock.notify_all()

    def finish(self):
        self.stop = True
        self.join(2)
        try:
            self.sock.close()
        except OSError:
            pass

    def diagnose(self):
        """What the first wrong echoed message looks like, message by message."""
        start = 0
        for e in self.ends:
            if e > len(self.rx) or e > self.sent:
                return None
            if self.rx[start:e] != self.out[start:e]:
                break
            start = e
        else:
            return None
        want = HDR.unpack(bytes(self.out[start:start + 32]))
        got = HDR.unpack(bytes(self.rx[start:start + 32]))
        body_ok = self.rx[start + 32:e] == self.out[start + 32:e]
        if got[0] == MAGIC and got[7] != want[7]:
            return ("message %d (offset %d): its echo carries the header of message %d "
                    "(body_len %d instead of %d), %s" % (
                        want[7], start, got[7], got[5], want[5],
                        "its own body follows" if body_ok else "the body differs too"))
        i = next(k for k in range(start, e) if self.rx[k] != self.out[k])
        piece = bytes(self.rx[i:min(e, i + 16)])
        where = self.out.find(piece) if len(piece) >= 8 else -1
        return ("message %d (offset %d, %d bytes): header %s; first wrong byte at body offset %d: "
                "got %s, which %s" % (
                    want[7], start, e - start, "ok" if got == want else "differs", i - start - 32,
                    piece.hex(), "the client sent at stream offset %d" % where if where >= 0
                    else "the client never sent (foreign bytes)"))

    def report(self):
        sent_sha = hashlib.sha256(bytes(self.out[:self.sent])).hexdigest()
        ok = self.error is None and self.bad_at is None and self.recv == self.sent and \
            sent_sha == self.rx_sha.hexdigest()
        return {"lport": self.lport, "bytes_sent": self.sent, "bytes_echoed": self.recv,
                "sha256_sent": sent_sha, "sha256_echoed": self.rx_sha.hexdigest(),
                "first_bad_offset": self.bad_at, "bad": self.bad_detail,
                "diagnosis": self.diagnose() if self.bad_at is not None else None, "error": self.error, "intact": ok}


class Tap:
    """The sniffer on the TAP: follows one tuple's sequence numbers and keeps every TCP
    segment the wharf node sends (its answers to what we inject), bounded in count."""

    KEEP = 200000

    def __init__(self, iface, lnx, wh, port):
        self.iface, self.lnx, self.wh, self.port = iface, lnx, wh, port
        self.lport = None
        self.lnx_nxt = self.wh_nxt = None  # highest seq+len seen each way on the tuple
        self.wh_ack = None                  # last ACK wharf sent on the tuple (its rcv_nxt)
        self.wh_win = None
        self.isn = {}                       # ("lnx"|"wh", Linux port) -> ISN, from SYNs
        self.from_wh = []                   # (time, sport, dport, flags, seq, ack, len)
        self.wh_total = 0
        self.lock = threading.Lock()
        self.sn = AsyncSniffer(iface=iface, filter="tcp and host %s" % wh, store=False,
                               prn=self._pkt)

    def start(self):
        self.sn.start()
        time.sleep(0.5)  # the socket is open once the thread runs; give it a moment

    def stop(self):
        try:
            self.sn.stop()
        except Exception:  # the sniffer may have died with the interface
            pass

    def follow(self, lport):
        with self.lock:
            self.lport = lport

    def _pkt(self, p):
        if IP not in p or TCP not in p:
            return
        ip, t = p[IP], p[TCP]
        try:
            plen = ip.len - ip.ihl * 4 - t.dataofs * 4
        except TypeError:  # a truncated header scapy could not fill in: not ours to follow
            return
        seglen = plen + (1 if t.flags.S else 0) + (1 if t.flags.F else 0)
        with self.lock:
            if t.flags.S and ip.src == self.lnx and t.dport == self.port and len(self.isn) < 64:
                self.isn.setdefault(("lnx", t.sport), t.seq)  # the first: not our forgeries
            elif t.flags.S and t.flags.A and ip.src == self.wh and len(self.isn) < 64:
                self.isn.setdefault(("wh", t.dport), t.seq)
            if ip.src == self.wh:
                self.wh_total += 1
                if len(self.from_wh) < self.KEEP:
                    self.from_wh.append((time.monotonic(), t.sport, t.dport, int(t.flags),
                                         t.seq, t.ack, plen))
            if self.lport is None:
                return
            if ip.src == self.lnx and t.sport == self.lport and t.dport == self.port:
                nxt = seq_add(t.seq, seglen)
                if self.lnx_nxt is None or seq_diff(nxt, self.lnx_nxt) > 0:
                    self.lnx_nxt = nxt
            elif ip.src == self.wh and t.sport == self.port and t.dport == self.lport:
                nxt = seq_add(t.seq, seglen)
                if self.wh_nxt is None or seq_diff(nxt, self.wh_nxt) > 0:
                    self.wh_nxt = nxt
                if t.flags.A:
                    self.wh_ack, self.wh_win = t.ack, t.window

    def settled(self, sent, recv, timeout=1.0):
        """A quiet connection's (rcv_nxt, snd_nxt) at the node: the ISNs the capture saw in
        the handshake plus the bytes the client's socket sent and received. Waits (up to
        timeout) for the capture's own last ACK and sequence to agree; the sniffer may miss
        packets under load, so disagreement is reported (third value False), not fatal.
        Returns None when the handshake was never seen."""
        end = time.monotonic() + timeout
        while True:
            with self.lock:
                li, wi = self.isn.get(("lnx", self.lport)), self.isn.get(("wh", self.lport))
                if li is None or wi is None:
                    st = None
                else:
                    st = (seq_add(li, 1 + sent), seq_add(wi, 1 + recv))
                    if (self.wh_ack, self.wh_nxt) == st:
                        return st + (True,)
            if time.monotonic() >= end:
                return None if st is None else st + (False,)
            time.sleep(0.05)

    def state(self):
        """(wharf's rcv_nxt, wharf's snd_nxt) on the followed tuple, as last seen."""
        with self.lock:
            return self.wh_ack, self.wh_nxt

    def mark(self):
        with self.lock:
            return len(self.from_wh)

    def since(self, mark, sport=None, dport=None):
        with self.lock:
            return [r for r in self.from_wh[mark:]
                    if (sport is None or r[1] == sport) and (dport is None or r[2] == dport)]


class Raw:
    """Frames straight onto the TAP (AF_PACKET): what the wharf node reads next."""

    def __init__(self, iface):
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        self.s.bind((iface, 0))
        self.sent = 0
        self.refused = 0

    def send(self, frame):
        try:
            self.s.send(bytes(frame))
            self.sent += 1
            return True
        except OSError:
            # A full TAP queue (ENOBUFS) or a frame the kernel will not send: counted.
            self.refused += 1
            return False


def read_rss(pid):
    """VmRSS and VmHWM of a process in KiB, from /proc."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k = line.split(":")[0]
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(line.split()[1])
    except OSError:
        pass
    return out


# A log line: "<time> INFO wharf.tl: <message>" (dpdk_net/dn_log.h).
_LOG = r"^\S+ [A-Z]+ wharf\.[a-z]+: "
_TL_RE = re.compile(_LOG + r"tl_tcp: (.*)$", re.M)
_DN_RE = re.compile(_LOG + r"dn: (.*)$", re.M)
_TLAPI_RE = re.compile(_LOG + r"tl: (.*)$", re.M)


def parse_node_stats(text):
    """The counters a wharf node logs at exit with WHARF_TL_STATS=1 (tl_be_dpdk.c), after
       each line's time, level and type:
       tl_tcp: seg in/out A/B ... drops: malformed N no_conn N ...
       tl: refused_conns N refused_conns_nomem N ...
       dn: rx N tx N sleeps N intr_timeouts N intr_late N reason=N ..."""
    st = {}
    m = _TL_RE.search(text)
    if m:
        s = m.group(1)
        for k, a, b in re.findall(r"(seg|bytes) in/out (\d+)/(\d+)", s):
            st[k + "_in"], st[k + "_out"] = int(a), int(b)
        head, _, drops = s.partition("drops:")
        for k, v in re.findall(r"([a-z_]+) (\d+)", head.replace("in/out", "")):
            st.setdefault(k, int(v))
        for k, v in re.findall(r"([a-z_]+) (\d+)", drops):
            st["drop_" + k] = int(v)
    m = _TLAPI_RE.search(text)
    if m:
        for k, v in re.findall(r"([a-z_]+) (\d+)", m.group(1)):
            st[k] = int(v)
    m = _DN_RE.search(text)
    if m:
        s = m.group(1)
        for k, v in re.findall(r"\b(rx|tx) (\d+)", s):
            st["dn_" + k] = int(v)
        for k, v in re.findall(r"([a-z0-9_]+)=(\d+)", s):
            st["dn_drop_" + k] = int(v)
    return st


class RawPeer:
    """A TCP peer written with scapy on a raw socket, for what a Linux socket will not do
    (an MSS below Linux's floor of 88, a window held at zero on purpose). It uses an
    address of the /24 that Linux does not own, with its own MAC, so Linux's stack never
    sees (or resets) its segments; an ARP request for the node makes the node learn it.
    One connection, one framed message, echoed back and reassembled."""

    def __init__(self, iface, wh, wmac, ip, port, sport, mss=None, wnd=65535):
        from scapy.all import ARP, Ether as E  # local: only this peer needs them
        self.iface, self.wh, self.wmac, self.ip, self.port, self.sport = iface, wh, wmac, ip, port, sport
        self.mac = "02:00:5e:%02x:%02x:%02x" % tuple(int(x) for x in ip.split(".")[1:])
        self.mss, self.wnd = mss, wnd
        self.s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
        self.s.bind((iface, 0))
        self.s.settimeout(0.05)
        self.E = E
        self.s.send(bytes(E(src=self.mac, dst="ff:ff:ff:ff:ff:ff") /
                          ARP(op=1, hwsrc=self.mac, psrc=ip, pdst=wh)))
        self.iss = random.getrandbits(32)
        self.snd_nxt = self.iss
        self.rcv_nxt = None
        self.data = bytearray()
        self.seg_sizes = []
        self.probes = 0          # segments the node sent into our zero window
        self.reset = False

    def _tx(self, flags, payload=b"", opts=None, wnd=None):
        t = TCP(sport=self.sport, dport=self.port, seq=self.snd_nxt, ack=self.rcv_nxt or 0,
                flags=flags, window=self.wnd if wnd is None else wnd, options=opts or [])
        self.s.send(bytes(self.E(src=self.mac, dst=self.wmac) / IP(src=self.ip, dst=self.wh) / t /
                          payload))

    def _rx(self, until, want=None):
        """Takes the node's segments to us until time `until` (or want() is true)."""
        while time.monotonic() < until and not (want and want()):
            try:
                raw = self.s.recv(65535)
            except socket.timeout:
                continue
            p = self.E(raw)
            if IP not in p or TCP not in p or p[IP].src != self.wh or p[IP].dst != self.ip or \
                    p[TCP].dport != self.sport:
                continue
            t = p[TCP]
            if t.flags.R:
                self.reset = True
                return
            if t.flags.S and t.flags.A and self.rcv_nxt is None:
                self.rcv_nxt = seq_add(t.seq, 1)
                self.snd_nxt = seq_add(self.snd_nxt, 1)
                self._tx("A")
                continue
            plen = p[IP].len - p[IP].ihl * 4 - t.dataofs * 4
            if self.rcv_nxt is None:
                continue
            if self.wnd == 0:
                # A window probe (zero-length or one byte past the window): still no
                # room, the node must keep probing without giving up on us.
                self.probes += 1
                self._tx("A")
                continue
            if plen <= 0:
                continue
            if t.seq == self.rcv_nxt:
                self.data += bytes(t.payload)[:plen]
                self.seg_sizes.append(plen)
                self.rcv_nxt = seq_add(self.rcv_nxt, plen)
            self._tx("A")

    def run(self, msg, hold_zero_secs=0.0, timeout=15.0):
        end = time.monotonic() + timeout
        opts = [("MSS", self.mss)] if self.mss is not None else []
        self._tx("S", opts=opts)
        self._rx(min(end, time.monotonic() + 3), lambda: self.rcv_nxt is not None)
        if self.rcv_nxt is None:
            return "no SYN-ACK"
        open_wnd, self.wnd = self.wnd, (0 if hold_zero_secs > 0 else self.wnd)
        self._tx("PA", msg)
        self.snd_nxt = seq_add(self.snd_nxt, len(msg))
        if hold_zero_secs > 0:
            self._rx(time.monotonic() + hold_zero_secs)
            self.wnd = open_wnd
            self._tx("A")          # window update: the echo may come now
        self._rx(end, lambda: len(self.data) >= len(msg) or self.reset)
        self._tx("R")
        return None
