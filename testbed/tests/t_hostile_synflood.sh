#!/usr/bin/env bash
# Hostile traffic 4/5: a SYN flood of 60,000 SYNs from random spoofed sources of the node's
# /24 (testbed/hostile/hostile.py synflood), paced at 8,000/s and cut at 16 s whatever the
# TAP took, while the live connection keeps echoing. The node answers SYN-ACKs to
# addresses nobody owns (ARP never resolves), so embryonic connections live until their
# SYN-ACK retries run out: the per-listener backlog (128) must hold them, not the table.
# Pass: the node stays up, the live stream is byte-exact, drop_backlog counts the SYNs over
# the backlog, a new connection opened every second during the flood is established within
# one retransmission of its SYN (SYN cookies past the backlog), a new legitimate connection
# opens and echoes intact after the flood, RSS grows by less than 16 MiB.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
HS_PHASE_SECS=150 hs_test synflood 198.18.45 7305 16384 --syns 60000 --rate 8000 \
	--flood-secs 16 --reconnect 30
