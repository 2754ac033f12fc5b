#!/usr/bin/python3
"""hostile.py -- hostile traffic against a live wharf node over TAP.

The Linux side of testbed/tests/t_hostile_*.sh. A wharf echo server (wharf-perf --server
--echo on net_tap) listens on WH:PORT; this script keeps a legitimate connection echoing
through it (hs_lib.Live: byte-exact check and SHA-256 of the stream) while it sends one
kind of hostile traffic on the TAP, and prints what it sent and what the node answered:

  hostile.py malformed --iface IF --lnx A --wh B --port P --expect FILE
      every malformed-frame variant of hs_frames.malformed(), REPS times each, aimed at the
      live tuple with an exact-sequence RST or data as payload.
  hostile.py window ...      overlapping (consistent) and far-out-of-window segments on the
                             live tuple, sequence numbers read from the TAP capture.
  hostile.py blind ...       RFC 5961: in-window RSTs (challenge ACK), out-of-window RSTs
                             (ignored), SYNs on the tuple (challenge ACK), data with an
                             unacceptable ACK (challenge ACK, data not taken).
  hostile.py synflood ...    --syns N SYNs from random spoofed sources of the /24, paced,
                             then a new legitimate connection must open within --reconnect s.
  hostile.py peers ...       a tiny-MSS peer (Linux socket, MSS 88; scapy peers with MSS
                             1 and 0), zero-window peers (Linux socket not reading; scapy
                             peer holding its window at 0) and a peer that never reads,
                             each in turn, next to the live connection (--parts).
  hostile.py limits ...      connections past the node's --max-conns are refused; never-
                             reading peers exhaust its (small) mempool and new connections
                             are refused meanwhile; the live connection keeps echoing.
  hostile.py check --expect FILE --log NODE_LOG
      compares the counters the node printed at exit (WHARF_TL_STATS=1) with what the
      phase sent; prints the table; exit 1 when a counter shows less than was sent or
      is not among the node's counters at all.

Every phase writes its expectations (counter -> at least N, and notes) as JSON to --expect
and prints one JSON result line last. Exit: 0 pass, 1 a check failed, 2 bad arguments.
Packet counts are bounded by the arguments; nothing is sent outside the TAP.
"""
import argparse
import json
import os
import random
import struct
import sys
import time

from scapy.all import TCP, IPOption

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hs_lib import (HDR, MAGIC, TYPE, VERSION, Live, Raw, RawPeer, Tap,  # noqa: E402
                    parse_node_stats, read_rss, seq_add)
from hs_frames import JUNK, Builder, malformed, tcp_cksum  # noqa: E402

A_FLAG = 0x10
R_FLAG = 0x04


def mac_of(iface):
    with open("/sys/class/net/%s/address" % iface) as f:
        return f.read().strip()


def neigh_mac(ip, iface):
    with open("/proc/net/arp") as f:
        for line in f.readlines()[1:]:
            c = line.split()
            if c[0] == ip and c[5] == iface and c[3] != "00:00:00:00:00:00":
                return c[3]
    return None


class Ctx:
    """What every phase needs: the TAP, the live connection, its sniffer, a sender."""

    def __init__(self, a, nbytes=4 << 20, seed=11):
        self.a = a
        self.fail = []
        self.notes = []
        self.expect = {}
        self.rows = []
        self.tap = Tap(a.iface, a.lnx, a.wh, a.port)
        self.tap.start()
        self.live = Live(a.wh, a.port, nbytes, seed)
        self.tap.follow(self.live.lport)
        self.live.start()
        wmac = neigh_mac(a.wh, a.iface)
        if wmac is None:
            raise SystemExit("hostile.py: no ARP entry for %s on %s (ping it first)" % (a.wh, a.iface))
        self.b = Builder(mac_of(a.iface), wmac, a.lnx, a.wh, a.port)
        self.raw = Raw(a.iface)
        self.step = 0
        self.seq_reads = {True: 0, False: 0}  # capture agreed / capture lagging
        self.stalled = False

    def advance(self, nbytes, what, timeout=12):
        """Lets the live client send nbytes more and waits for their echo."""
        self.live.allow(self.step + nbytes)
        self.step = self.live.limit
        # Once stalled, later waits are short: the failure is recorded, the test stays bounded.
        if not self.live.wait_echoed(3 if self.stalled else timeout):
            self.stalled = True
            self.fail.append("live connection stalled or broke %s: %s" % (what, self.live.report()))
            return False
        time.sleep(0.3)  # Linux's delayed ACK, then the sniffer's view is final
        return True

    def seqs(self):
        """The live tuple's (rcv_nxt, snd_nxt) at the node, read from the capture once it
        agrees with the client's own byte counts."""
        st = self.tap.settled(self.live.sent, self.live.recv)
        if st is None:
            raise SystemExit("hostile.py: the capture never saw the live connection's handshake "
                             "(sniffer %s, ISNs %s, client sent %d recv %d)" % (
                                 self.tap.state(), self.tap.isn, self.live.sent, self.live.recv))
        self.seq_reads[st[2]] += 1
        return st[:2]

    def expect_at_least(self, counter, n, what):
        self.expect.setdefault(counter, {"at_least": 0, "what": []})
        self.expect[counter]["at_least"] += n
        if what not in self.expect[counter]["what"]:
            self.expect[counter]["what"].append(what)

    def row(self, what, sent, answer):
        self.rows.append((what, sent, answer))
        print("[%s] %s: %s" % (time.strftime("%H:%M:%S"), what, answer), file=sys.stderr, flush=True)

    def finish(self, extra=None):
        ok_step = self.advance(len(self.live.out) - self.step, "at the end")
        rep = self.live.report()
        self.live.finish()
        time.sleep(0.2)
        self.tap.stop()
        if not rep["intact"]:
            if rep.get("diagnosis"):
                self.fail.insert(0, "live echo corrupted: " + rep["diagnosis"])
            self.fail.append("live connection's echoed stream is not intact: %s" % rep)
        self.notes.append("sequence reads: %d confirmed by the capture's last segments, %d from "
                          "handshake ISNs + socket byte counts (sniffer lagging)"
                          % (self.seq_reads[True], self.seq_reads[False]))
        res = {"live": rep, "frames_sent": self.raw.sent, "frames_refused_by_kernel": self.raw.refused,
               "wharf_segments_seen": self.tap.wh_total, "failures": self.fail, "notes": self.notes}
        res.update(extra or {})
        res["ok"] = not self.fail and ok_step
        if self.a.expect:
            with open(self.a.expect, "w") as f:
                json.dump({"expect": self.expect, "rows": self.rows}, f)
        print("%-44s %8s  %s" % ("sent", "frames", "answer seen on the TAP"))
        for what, sent, answer in self.rows:
            print("%-44s %8d  %s" % (what, sent, answer))
        print(json.dumps(res), flush=True)
        return 0 if res["ok"] else 1


def tap_tx_dropped(iface):
    """Frames the kernel dropped on their way into the TAP (the node's Rx side)."""
    try:
        with open("/sys/class/net/%s/statistics/tx_dropped" % iface) as f:
            return int(f.read())
    except (OSError, ValueError):
        return 0


def new_conn_ok(a, timeout, nbytes=65536, seed=5):
    """A fresh connection that echoes nbytes intact; (ok, seconds to connect, detail)."""
    t0 = time.monotonic()
    try:
        lv = Live(a.wh, a.port, nbytes, seed)
    except OSError as e:
        return False, time.monotonic() - t0, "connect: %s" % e
    t1 = time.monotonic() - t0
    lv.start()
    lv.allow(len(lv.out))
    ok = lv.wait_echoed(timeout)
    rep = lv.report()
    lv.finish()
    return ok and rep["intact"], t1, rep


# ---- phases ------------------------------------------------------------------------------

def phase_malformed(a):
    c = Ctx(a)
    c.advance(256 << 10, "before the attack")
    rcv, snd = c.seqs()
    mark = c.tap.mark()
    other = a.wh.rsplit(".", 1)[0] + ".77"
    variants = [v for v in malformed(c.b, c.live.lport, rcv, snd, other)
                if not a.only or any(v[0].startswith(o) for o in a.only.split(","))]
    per = {}
    for _ in range(a.reps):
        for name, counter, frame in variants:
            if c.raw.send(frame):
                per[name] = per.get(name, 0) + 1
            time.sleep(0.0005)
    time.sleep(0.5)
    answers = c.tap.since(mark, a.port, c.live.lport)
    for name, counter, _frame in variants:
        n = per.get(name, 0)
        c.row(name, n, "-> " + counter)
        if n == 0:
            c.notes.append("%s: the kernel refused to send it (nothing reached the node)" % name)
            continue
        c.expect_at_least(counter, n, name)
    rsts = [r for r in answers if r[3] & R_FLAG]
    if rsts:
        c.fail.append("wharf sent %d RSTs on the live tuple during the malformed frames" % len(rsts))
    c.notes.append("wharf segments on the live tuple while malformed frames arrived: %d" % len(answers))
    ok, secs, det = new_conn_ok(a, 10)
    if not ok:
        c.fail.append("a new connection after the malformed frames failed: %s" % det)
    return c.finish({"variants": len(variants), "reps": a.reps, "new_conn_after": ok})


def inject_and_watch(c, frame, n=1, wait=0.25):
    """Sends frame n times; returns the wharf segments on the live tuple that followed."""
    mark = c.tap.mark()
    for _ in range(n):
        c.raw.send(frame)
        time.sleep(0.002)
    time.sleep(wait)
    return c.tap.since(mark, c.a.port, c.live.lport)


def acks_to(segs, ack):
    return sum(1 for r in segs if r[3] & A_FLAG and not r[3] & R_FLAG and r[5] == ack and r[6] == 0)


def phase_window(a):
    c = Ctx(a)
    c.advance(256 << 10, "before the attack")
    out, lp = c.live.out, c.live.lport

    # 1. exact duplicate of the last 100 bytes, and an overlap that also carries new bytes
    rcv, snd = c.seqs()
    s0 = c.live.sent
    segs = inject_and_watch(c, c.b.tcp(lp, seq_add(rcv, -100), snd, "PA", out[s0 - 100:s0]), 5)
    c.row("old dup (seq rcv_nxt-100, 100 true bytes)", 5, "%d ACKs of rcv_nxt" % acks_to(segs, rcv))
    c.expect_at_least("dup_segs", 5, "old duplicate segments")
    if acks_to(segs, rcv) == 0:
        c.fail.append("no ACK answered a duplicate segment")
    segs = inject_and_watch(c, c.b.tcp(lp, seq_add(rcv, -100), snd, "PA", out[s0 - 100:s0 + 300]), 1)
    c.row("overlap old+new (rcv_nxt-100 .. +300, true bytes)", 1,
          "%d ACKs of rcv_nxt+300" % acks_to(segs, seq_add(rcv, 300)))
    if acks_to(segs, seq_add(rcv, 300)) == 0:
        c.fail.append("the overlapping segment's 300 new bytes were not acknowledged")
    c.advance(64 << 10, "after the overlapping segment")

    # 2. overlapping out-of-order pieces (true bytes), then the client fills the hole
    rcv, snd = c.seqs()
    s0 = c.live.sent
    pieces = [(1000, 2000), (1500, 2500), (500, 1200), (2400, 4000), (1000, 2000)]
    for lo, hi in pieces:
        segs = inject_and_watch(c, c.b.tcp(lp, seq_add(rcv, lo), snd, "PA", out[s0 + lo:s0 + hi]), 1, 0.05)
    c.row("5 overlapping out-of-order pieces (true bytes)", len(pieces), "then the client fills the hole")
    c.expect_at_least("ooo", 1, "overlapping out-of-order pieces")
    c.advance(64 << 10, "after the out-of-order pieces")

    # 2b. the next true bytes inside an IPv4 header with options (IHL 6): taken as data
    rcv, snd = c.seqs()
    s0 = c.live.sent
    frame = bytes(c.b.eth() / c.b.ip(options=[IPOption(b"\x01\x01\x01\x00")]) /
                  TCP(sport=lp, dport=a.port, seq=rcv, ack=snd, flags="PA", window=65535) /
                  out[s0:s0 + 100])
    segs = inject_and_watch(c, frame, 1)
    c.row("next 100 true bytes, IPv4 header with options (IHL 6)", 1,
          "%d ACKs of rcv_nxt+100" % acks_to(segs, seq_add(rcv, 100)))
    if acks_to(segs, seq_add(rcv, 100)) == 0:
        c.fail.append("a segment in an IPv4 header with options was not taken")
    c.advance(64 << 10, "after the IP-options segment")

    # 3. far out of window, each way, with data and as pure ACKs
    rcv, snd = c.seqs()
    far = [("seq rcv_nxt+2^30, 64 junk bytes", seq_add(rcv, 1 << 30), JUNK),
           ("seq rcv_nxt+2MiB+4096 (past rcv_buf), junk", seq_add(rcv, (2 << 20) + 4096), JUNK),
           ("seq rcv_nxt+2^31-1, junk", seq_add(rcv, (1 << 31) - 1), JUNK)]
    for what, seq, pl in far:
        segs = inject_and_watch(c, c.b.tcp(lp, seq, snd, "PA", pl), 10, 0.1)
        c.row(what, 10, "%d ACKs of rcv_nxt, %d RSTs" % (acks_to(segs, rcv), len(
            [r for r in segs if r[3] & R_FLAG])))
        c.expect_at_least("drop_window" if seq_add(seq, -rcv) < (1 << 31) - 1 else "dup_segs", 10,
                          "far out-of-window data" if seq_add(seq, -rcv) < (1 << 31) - 1
                          else "data at +2^31-1 (as far in the past as ahead)")
    segs = inject_and_watch(c, c.b.tcp(lp, seq_add(rcv, -(1 << 30)), snd, "PA", JUNK), 10, 0.1)
    c.row("seq rcv_nxt-2^30, junk (far in the past)", 10, "%d ACKs" % acks_to(segs, rcv))
    c.expect_at_least("dup_segs", 10, "far-past data")
    rsts = [r for r in c.tap.since(0, a.port, lp) if r[3] & R_FLAG]
    if rsts:
        c.fail.append("wharf reset the live connection (%d RSTs)" % len(rsts))
    return c.finish()


def phase_blind(a):
    c = Ctx(a)
    c.advance(256 << 10, "before the attack")
    lp = c.live.lport
    rcv, snd = c.seqs()
    win = c.tap.wh_win
    cases = [
        # what, frame, expect a challenge ACK?, counter
        ("RST seq rcv_nxt+1 (in window, not exact)", c.b.tcp(lp, seq_add(rcv, 1), 0, "R"), True),
        ("RST seq rcv_nxt+1000", c.b.tcp(lp, seq_add(rcv, 1000), 0, "R"), True),
        ("RST|ACK seq rcv_nxt+30000", c.b.tcp(lp, seq_add(rcv, 30000), snd, "RA"), True),
        ("RST seq rcv_nxt+2^31 (out of window)", c.b.tcp(lp, seq_add(rcv, 1 << 31), 0, "R"), False),
        ("RST seq rcv_nxt-5000 (old)", c.b.tcp(lp, seq_add(rcv, -5000), 0, "R"), False),
        ("RST seq rcv_nxt+2^30", c.b.tcp(lp, seq_add(rcv, 1 << 30), 0, "R"), False),
        ("SYN seq rcv_nxt+10 (in window)", c.b.tcp(lp, seq_add(rcv, 10), 0, "S",
                                                   options=[("MSS", 1460)]), True),
        ("SYN seq rcv_nxt (exact)", c.b.tcp(lp, rcv, 0, "S"), True),
        ("SYN seq random (out of window)", c.b.tcp(lp, seq_add(rcv, 0x5a5a5a5a), 0, "S"), True),
        ("data at rcv_nxt, ACK snd_nxt+2^30 (unsent)", c.b.tcp(lp, rcv, seq_add(snd, 1 << 30), "PA",
                                                                JUNK), True),
        ("data at rcv_nxt, ACK snd_nxt-2^31+1 (too old)", c.b.tcp(lp, rcv, seq_add(snd, -(1 << 31) + 1),
                                                                   "PA", JUNK), True),
    ]
    for what, frame, challenge in cases:
        # Spaced out: an unacceptable pure ACK is answered at most every 500 ms.
        segs = inject_and_watch(c, frame, 3, 0.3)
        acks = acks_to(segs, rcv)
        rsts = [r for r in segs if r[3] & R_FLAG]
        c.row(what, 3, "%d ACKs (seq %s), %d RSTs" % (acks, "ok" if all(
            r[4] == snd for r in segs) else "?", len(rsts)))
        if challenge and acks == 0:
            c.fail.append("%s: no challenge ACK" % what)
        if not challenge and segs:
            c.fail.append("%s: answered (%d segments), expected silence" % (what, len(segs)))
        if rsts:
            c.fail.append("%s: wharf sent RST" % what)
        time.sleep(0.3)
        r2, s2 = c.seqs()
        if (r2, s2) != (rcv, snd):
            c.fail.append("%s moved the connection's state: rcv %d->%d snd %d->%d"
                          % (what, rcv, r2, snd, s2))
            rcv, snd = r2, s2
    c.expect_at_least("challenge_acks", 3 * 3 + 2 * 3 + 2 * 3, "in-window RSTs, SYNs, bad-ACK data")
    c.expect_at_least("drop_bad_ack", 6, "data with unacceptable ACKs")
    c.notes.append("receive window advertised by wharf on the tuple: %s (unscaled)" % win)
    return c.finish()


def syn_frames(b, a, n, seed):
    """n SYN frames from random sources in the node's /24 (never .0/.1/.2/.255)."""
    rng = random.Random(seed)
    base = b.tcp(1, 0, 0, "S", options=[("MSS", 1460), ("WScale", 7), ("SAckOK", b"")])
    net = [int(x) for x in a.wh.split(".")[:3]]
    hdr = bytearray(base)
    for _ in range(n):
        src = bytes(net + [rng.randrange(3, 255)])
        sport = rng.randrange(1024, 65535)
        seq = rng.getrandbits(32)
        f = bytearray(hdr)
        f[26:30] = src
        f[24:26] = b"\0\0"
        ipsum = 0
        ipb = bytes(f[14:34])
        s = sum(struct.unpack("!10H", ipb))
        while s >> 16:
            s = (s & 0xffff) + (s >> 16)
        ipsum = ~s & 0xffff
        f[24:26] = struct.pack("!H", ipsum)
        f[34:36] = struct.pack("!H", sport)
        f[38:42] = struct.pack("!I", seq)
        f[50:52] = b"\0\0"
        seg = bytes(f[34:])
        f[50:52] = struct.pack("!H", tcp_cksum(".".join(map(str, src)), a.wh, seg))
        yield bytes(f)


class ConnProbes:
    """A new connection to the node every second while the flood runs, each timed from
    connect() to established (threads: a SYN waiting on its retransmission must not hold
    the flood back). Linux resends an unanswered SYN after 1 s: a connection that opens
    within 2 s needed at most one retransmission of its SYN."""

    def __init__(self, a):
        import threading
        self.a = a
        self.times = []
        self.lock = threading.Lock()
        self.threads = []
        self.next_at = time.monotonic()

    def _one(self):
        import socket
        t0 = time.monotonic()
        try:
            s = socket.create_connection((self.a.wh, self.a.port), timeout=10)
            dt = time.monotonic() - t0
            s.close()
        except OSError:
            dt = None
        with self.lock:
            self.times.append(dt)

    def tick(self):
        import threading
        now = time.monotonic()
        if now < self.next_at:
            return
        self.next_at = now + 1.0
        t = threading.Thread(target=self._one, daemon=True)
        t.start()
        self.threads.append(t)

    def finish(self):
        for t in self.threads:
            t.join(12)
        return list(self.times)


def phase_synflood(a):
    c = Ctx(a, nbytes=8 << 20)
    probes = ConnProbes(a)
    c.advance(256 << 10, "before the flood")
    rss0 = read_rss(a.node_pid)
    drops0 = tap_tx_dropped(a.iface)
    t0 = time.monotonic()
    sent = 0
    gap = 1.0 / a.rate
    nxt = t0
    chunk = 0
    for f in syn_frames(c.b, a, a.syns, 1234):
        c.raw.send(f)
        sent += 1
        nxt += gap
        chunk += 1
        if chunk >= 64:
            chunk = 0
            # The live client keeps going during the flood, a little at a time.
            if sent % 4096 == 0:
                c.live.allow(c.step + (16 << 10))
                c.step = c.live.limit
            probes.tick()
            d = nxt - time.monotonic()
            if d > 0:
                time.sleep(d)
        if time.monotonic() - t0 > a.flood_secs:
            c.notes.append("flood cut at %.1f s after %d SYNs" % (a.flood_secs, sent))
            break
    secs = time.monotonic() - t0
    rss1 = read_rss(a.node_pid)
    time.sleep(0.5)
    lost = tap_tx_dropped(a.iface) - drops0
    c.row("SYNs from random spoofed /24 sources to port %d" % a.port, c.raw.sent,
          "%.1f s, %.0f/s; %d refused by the kernel, %d dropped by the TAP queue (node not "
          "reading fast enough)" % (secs, c.raw.sent / secs, c.raw.refused, lost))
    if not c.live.wait_echoed(20):
        c.fail.append("the live connection stalled during the SYN flood: %s" % c.live.report())
    ptimes = probes.finish()
    slow = [t for t in ptimes if t is None or t > 2.0]
    worst = max([t for t in ptimes if t is not None] or [0.0])
    c.row("a new connection every second during the flood", len(ptimes),
          "%d opened within one SYN retransmission (2 s), worst %.2f s, %d failed"
          % (len(ptimes) - len(slow), worst, sum(1 for t in ptimes if t is None)))
    if not ptimes or slow:
        c.fail.append("%d of %d connections opened during the flood took more than one SYN "
                      "retransmission (2 s) or failed" % (len(slow), len(ptimes)))
    # A new legitimate connection: Linux retries its SYN (1, 3, 7, 15 s...) while
    # embryonic slots of the flood expire.
    t1 = time.monotonic()
    ok, conn_secs, det = new_conn_ok(a, 10)
    tries = 1
    while not ok and time.monotonic() - t1 < a.reconnect:
        c.notes.append("new connection attempt %d at +%.1f s: %s" % (
            tries, time.monotonic() - t1, det if isinstance(det, str) else "echo incomplete"))
        tries += 1
        ok, conn_secs, det = new_conn_ok(a, 10)
    wait = time.monotonic() - t1
    c.row("new legitimate connection after the flood", tries,
          "%s after %.1f s (connect took %.1f s)" % ("echoed intact" if ok else "FAILED", wait, conn_secs))
    if not ok:
        c.fail.append("no new legitimate connection within %d s after the flood: %s" % (a.reconnect, det))
    c.expect_at_least("drop_backlog", max(0, c.raw.sent - 20000), "SYNs over the 128 backlog")
    rss2 = read_rss(a.node_pid)
    return c.finish({"syns_sent": c.raw.sent, "syns_dropped_by_tap": lost,
                     "flood_seconds": round(secs, 2),
                     "new_conn_ok": ok, "new_conn_wait_s": round(wait, 2),
                     "probe_connect_s": [None if t is None else round(t, 3) for t in ptimes],
                     "rss_kib": {"before": rss0, "after_flood": rss1, "after_reconnect": rss2}})


def phase_peers(a):
    c = Ctx(a)
    c.advance(256 << 10, "before the peers")
    rss0 = read_rss(a.node_pid)
    parts = a.parts.split(",")
    if "tiny" in parts:
        peer_tiny_mss(c, a)
    if "zero" in parts:
        peer_zero_window(c, a)
    if "rawmss" in parts:
        peer_raw(c, a, "raw peer, MSS option 1 (node clamps to 64)", 4, mss=1)
        peer_raw(c, a, "raw peer, MSS option 0", 5, mss=0)
    if "rawzero" in parts:
        peer_raw(c, a, "raw peer, window 0 for 3 s after its request", 6, hold_zero=3.0)
    rss1 = read_rss(a.node_pid)
    if "never" in parts:
        return peer_never_reads(c, a, rss0, rss1)
    return c.finish({"rss_kib": {"before": rss0, "after": rss1}})


def peer_tiny_mss(c, a):
    # 1. tiny MSS: Linux's floor is 88 (TCP_MAXSEG); the node then sends 76-byte segments.
    t = Live(a.wh, a.port, 1 << 20, 21, maxseg=88)
    t.start()
    t.allow(len(t.out))
    ok = t.wait_echoed(30)
    rep = t.report()
    t.finish()
    c.row("tiny-MSS peer (TCP_MAXSEG 88): 1 MiB framed", 1, "echoed intact" if ok and rep["intact"]
          else "BROKEN %s" % rep)
    if not (ok and rep["intact"]):
        c.fail.append("tiny-MSS peer: %s" % rep)
    c.advance(64 << 10, "after the tiny-MSS peer")


def peer_raw(c, a, what, host, mss=None, hold_zero=0.0):
    """A scapy TCP peer (hs_lib.RawPeer) at .host of the /24 sends one 400-byte message."""
    rng = random.Random(host)
    body = rng.randbytes(400)
    msg = HDR.pack(MAGIC, VERSION, TYPE, 0, 0, len(body), 7, host, 0, 0) + body
    ip = a.wh.rsplit(".", 1)[0] + ".%d" % (100 + host)
    p = RawPeer(a.iface, a.wh, c.b.wmac, ip, a.port, 40000 + host, mss=mss)
    err = p.run(msg, hold_zero_secs=hold_zero)
    ok = err is None and bytes(p.data) == msg and not p.reset
    biggest = max(p.seg_sizes) if p.seg_sizes else 0
    ans = "%s; echo %d/%d B in %d segments (largest %d)%s%s" % (
        "echoed intact" if ok else "BROKEN (%s)" % (err or ("reset" if p.reset else "bytes differ")),
        len(p.data), len(msg), len(p.seg_sizes), biggest,
        ", %d segments into the zero window" % p.probes if hold_zero else "",
        "" if mss is None else "")
    c.row(what, 1, ans)
    if not ok:
        c.fail.append("%s: %s" % (what, ans))
    if mss is not None and biggest > 64:
        c.fail.append("%s: the node sent %d-byte segments to a peer with MSS %d (clamp is 64)"
                      % (what, biggest, mss))
    c.advance(32 << 10, "after the %s" % what)


def peer_zero_window(c, a):
    # 2. zero window: a peer with the smallest receive buffer stops reading for 5 s.
    z = Live(a.wh, a.port, 2 << 20, 22, rcvbuf=1, read=False)
    z.start()
    z.allow(len(z.out))
    time.sleep(5)
    mid = z.report()
    c.advance(64 << 10, "while a zero-window peer waits")
    z.set_read(True)
    ok = z.wait_echoed(40)
    rep = z.report()
    z.finish()
    c.row("zero-window peer (SO_RCVBUF min, no reads 5 s): 2 MiB", 1,
          "%d B sent while not reading; then %s" % (mid["bytes_sent"], "echoed intact"
                                                     if ok and rep["intact"] else "BROKEN %s" % rep))
    if not (ok and rep["intact"]):
        c.fail.append("zero-window peer: %s" % rep)
    c.expect_at_least("probes", 1, "zero-window probes")


def peer_never_reads(c, a, rss0, rss1):
    # 3. never reads: sends 32 MiB into a peer that never reads; the live one keeps working.
    nrs = [Live(a.wh, a.port, 32 << 20, 23 + i, rcvbuf=1, read=False) for i in range(a.never_readers)]
    for nr in nrs:
        nr.start()
        nr.allow(len(nr.out))
    rss, rounds = [], 0
    for i in range(8):
        time.sleep(1)
        rss.append(read_rss(a.node_pid).get("VmRSS"))
        if not c.advance(32 << 10, "while a peer never reads (%d s)" % (i + 1), 5):
            break
        rounds += 1
    got_in = sum(nr.report()["bytes_sent"] for nr in nrs)
    for nr in nrs:
        nr.finish()     # Linux resets them (unread data): the node may free what they held
    ok, secs, det = new_conn_ok(a, 10)
    for i in range(1):
        if ok:
            break
        c.notes.append("new connection after the never-readers left, try %d: %s" % (i + 1, det))
        time.sleep(5)
        ok, secs, det = new_conn_ok(a, 10)
    rss2 = read_rss(a.node_pid)
    c.row("%d never-reading peer(s): each offers 32 MiB, reads nothing, 8 s" % len(nrs), len(nrs),
          "they got %d B in; live conn echoed %d of 8 x 32 KiB rounds; new conn %s" % (
              got_in, rounds, "ok" if ok else "FAILED"))
    if not ok:
        c.fail.append("a new connection next to the never-reading peer failed: %s" % det)
    return c.finish({"rss_kib": {"before": rss0, "before_never_reader": rss1,
                                 "during_never_reader": rss, "after": rss2},
                     "never_readers": len(nrs), "never_reader_bytes_in": got_in})


def probes(a, n, nbytes, seed, timeout):
    """n connections opened together, each echoing nbytes; returns (ok, refused, conns).
    A refused one is reset by the node right after the handshake (or never connects)."""
    conns, ok, refused = [], 0, 0
    for i in range(n):
        try:
            conns.append(Live(a.wh, a.port, nbytes, seed + i))
        except OSError:
            refused += 1
    for lv in conns:
        lv.start()
        lv.allow(len(lv.out))
    for lv in conns:
        if lv.wait_echoed(timeout) and lv.report()["intact"]:
            ok += 1
        else:
            refused += 1
    return ok, refused, conns


def phase_limits(a):
    """The node runs with --max-conns M and a small mempool (--nb-mbufs): connections past
    M are refused and counted; never-reading peers drive the mempool low, and while it is
    critically low new connections are refused and the backed-up peers' data segments are
    dropped, both counted; the node keeps answering, the live connection keeps echoing, and
    new connections work again once the load is gone."""
    c = Ctx(a)
    c.advance(64 << 10, "before the limits")
    # 1. the connection cap: the live connection holds one of the max_conns slots.
    extra = a.max_conns + 4
    ok, refused, conns = probes(a, extra, 4096, 101, 5)
    want_ok = a.max_conns - 1
    c.row("%d connections next to the live one, cap %d" % (extra, a.max_conns), extra,
          "%d echoed, %d refused" % (ok, refused))
    if ok != want_ok or refused != extra - want_ok:
        c.fail.append("connection cap %d: %d echoed and %d refused of %d, expected %d and %d" % (
            a.max_conns, ok, refused, extra, want_ok, extra - want_ok))
    c.expect_at_least("refused_conns", extra - want_ok, "connections past max_conns")
    for lv in conns:
        lv.finish()
    c.advance(32 << 10, "after the capped connections")
    time.sleep(1)  # their closes reach the node
    ok1, secs, det = new_conn_ok(a, 10)
    c.row("a new connection once they closed", 1, "ok" if ok1 else "FAILED")
    if not ok1:
        c.fail.append("a new connection after the capped ones closed failed: %s" % det)
    # 2. mempool exhaustion: never-readers hold the node's buffers.
    nrs = [Live(a.wh, a.port, 32 << 20, 23 + i, rcvbuf=1, read=False) for i in range(a.never_readers)]
    for nr in nrs:
        nr.start()
        nr.allow(len(nr.out))
    time.sleep(3)
    ok2, refused2, conns2 = 0, 0, []
    for i in range(5):
        o, r, cs = probes(a, 2, 4096, 201 + 2 * i, 3)
        ok2, refused2, conns2 = ok2 + o, refused2 + r, conns2 + cs
        if r > 0:
            break
        time.sleep(1)
    # The live connection is not backed up: its data still goes in (the never-readers'
    # is dropped for them to resend) and it keeps echoing.
    live_ok = c.advance(16 << 10, "while never-readers hold the mempool", 8)
    got_in = sum(nr.report()["bytes_sent"] for nr in nrs)
    c.row("%d never-readers (%d B in), then new connections" % (len(nrs), got_in),
          ok2 + refused2, "%d echoed, %d refused; live conn %s" % (
              ok2, refused2, "echoing" if live_ok else "STALLED"))
    if refused2 == 0:
        c.fail.append("no new connection was refused while never-readers held the mempool")
    else:
        c.expect_at_least("refused_conns_nomem", 1, "connections while the mempool was low")
        c.expect_at_least("rx_dropped_nomem", 1, "data segments while the mempool was low")
    for lv in conns2:
        lv.finish()
    for nr in nrs:
        nr.finish()     # Linux resets them: the node frees what they held
    time.sleep(2)
    ok3, secs, det = new_conn_ok(a, 10)
    c.row("a new connection after the never-readers left", 1, "ok" if ok3 else "FAILED")
    if not ok3:
        c.fail.append("a new connection after the mempool recovered failed: %s" % det)
    c.advance(32 << 10, "after the never-readers left")
    return c.finish({"cap": {"max_conns": a.max_conns, "echoed": ok, "refused": refused},
                     "mempool": {"never_readers": len(nrs), "bytes_in": got_in,
                                 "echoed": ok2, "refused": refused2}})


def phase_check(a):
    with open(a.expect) as f:
        exp = json.load(f)["expect"]
    with open(a.log) as f:
        st = parse_node_stats(f.read())
    if not st:
        print("hostile.py check: no WHARF_TL_STATS counters in %s" % a.log)
        return 1
    bad = 0
    print("%-26s %10s %10s  %s" % ("counter", "sent>=", "node", "for"))
    for k, e in sorted(exp.items()):
        # The dn line lists only the drop reasons that counted something: absent is 0.
        got = st.get(k, 0 if k.startswith("dn_drop_") else None)
        if got is None:
            # Not in the node's exit dump (tl_be_dpdk.c db_dump_stats): renamed or never
            # printed, and a counter that cannot be read proves nothing.
            bad += 1
            print("%-26s %10d %10s  %s   <-- FAIL: not in the node's counters" % (
                k, e["at_least"], "absent", ", ".join(e["what"])[:90]))
            continue
        verdict = got >= e["at_least"]
        bad += not verdict
        print("%-26s %10d %10s  %s%s" % (k, e["at_least"], got, ", ".join(e["what"])[:90],
                                         "" if verdict else "   <-- FAIL"))
    print("all node counters: " + json.dumps(st))
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("phase", choices=["malformed", "window", "blind", "synflood", "peers", "limits",
                                     "check"])
    p.add_argument("--iface")
    p.add_argument("--lnx")
    p.add_argument("--wh")
    p.add_argument("--port", type=int, default=7300)
    p.add_argument("--expect")
    p.add_argument("--log")
    p.add_argument("--node-pid", type=int, default=0)
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--parts", default="tiny,zero,rawmss,rawzero,never", help="peers: which peers (comma list)")
    p.add_argument("--never-readers", type=int, default=1, help="peers, limits: how many never read")
    p.add_argument("--max-conns", type=int, default=8, help="limits: the node's --max-conns")
    p.add_argument("--only", help="malformed: variants whose names start with these (comma list)")
    p.add_argument("--syns", type=int, default=100000)
    p.add_argument("--rate", type=float, default=8000, help="SYNs per second")
    p.add_argument("--flood-secs", type=float, default=28)
    p.add_argument("--reconnect", type=float, default=40)
    a = p.parse_args()
    if a.phase == "check":
        if not (a.expect and a.log):
            p.error("check needs --expect and --log")
        return phase_check(a)
    if not (a.iface and a.lnx and a.wh):
        p.error("--iface, --lnx and --wh are required")
    if a.syns < 1 or a.syns > 200000 or a.reps < 1 or a.reps > 100 or a.rate <= 0:
        p.error("--syns 1..200000, --reps 1..100, --rate > 0")
    return {"malformed": phase_malformed, "window": phase_window, "blind": phase_blind,
            "synflood": phase_synflood, "peers": phase_peers, "limits": phase_limits}[a.phase](a)


if __name__ == "__main__":
    sys.exit(main())
