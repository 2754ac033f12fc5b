#!/usr/bin/env bash
# Hostile traffic 3/5: blind RST / SYN / data injection on a live connection (RFC 5961),
# testbed/hostile/hostile.py blind. Each case is sent 3 times while the connection is quiet:
# RSTs in the window but not at rcv_nxt (challenge ACK expected), RSTs out of the window
# (silence expected), SYNs on the established tuple in and out of the window (challenge
# ACK), data at rcv_nxt whose ACK acknowledges unsent or too-old data (challenge ACK, data
# not taken).
# Pass: every case answered as RFC 5961 says, no RST from the node, the connection's
# state (rcv_nxt, snd_nxt) unchanged by any injection, the echoed stream byte-exact,
# challenge_acks and drop_bad_ack count what was sent.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
hs_test blind 198.18.44 7304 8192
