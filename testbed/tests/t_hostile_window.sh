#!/usr/bin/env bash
# Hostile traffic 2/5: overlapping and far-out-of-window segments on a live connection's
# 4-tuple (testbed/hostile/hostile.py window). The sequence numbers come from a capture
# on the TAP while the connection is quiet. Sent: exact duplicates of old data, a segment
# overlapping old and new bytes, five overlapping out-of-order pieces (all carrying the
# stream's true bytes, so a correct receiver keeps the stream intact), the next 100 true
# bytes in an IPv4 header with options (IHL 6, must be taken), and junk data at
# rcv_nxt+2^30, past the 2 MiB window (rcv_buf), at +2^31-1 and at -2^30.
# Pass: duplicates and far segments answered by ACKs of rcv_nxt, never a RST; the echoed
# stream is byte-exact; dup_segs / ooo_queued / drop_window count what was sent.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
hs_test window 198.18.43 7303 8192
