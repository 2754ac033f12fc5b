#!/usr/bin/env bash
# Hostile traffic 6/6: limits (testbed/hostile/hostile.py limits). The node runs with
# --max-conns 8 and a small mempool (--nb-mbufs). 12 Linux connections open next to the
# live one: 7 echo, 5 are reset right after their handshake and counted (refused_conns);
# once they close a new connection works. Then never-reading peers each offer 32 MiB and
# read nothing, holding the node's buffers until its mempool runs critically low: new
# connections are reset (refused_conns_nomem) and the backed-up peers' data segments dropped
# for them to resend (rx_dropped_nomem) meanwhile, so the Rx ring keeps refilling, the node
# keeps hearing ACKs and RSTs and the live connection keeps echoing; once the peers leave
# (Linux resets them), a new connection works.
# Pass: the counts above, the live stream byte-exact, the node up to the end (clean exit),
# its counters account for the refusals, RSS grows by less than 16 MiB.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
HS_NODE_ARGS="--max-conns 8 --nb-mbufs ${HS_LIMITS_MBUFS:-4096}" HS_PHASE_SECS=120 \
	hs_test limits 198.18.47 7307 16384 --max-conns 8 --never-readers 4
