#!/usr/bin/env bash
# Hostile traffic 5/5: hostile peers next to a live connection (testbed/hostile/hostile.py
# peers): a tiny-MSS peer (Linux TCP_MAXSEG 88, its floor: the node sends 76-byte
# segments) echoing 1 MiB; a zero-window peer (smallest SO_RCVBUF) that sends 2 MiB and
# reads nothing for 5 s, then everything; scapy peers (hs_lib.RawPeer, an address Linux
# does not own) with MSS option 1 and 0 (the node clamps to 64: 432 bytes come back in 7
# segments of at most 64) and one that holds its window at 0 for 3 s (the node probes);
# four peers that each offer 32 MiB and never read, for 8 s, while the live connection
# keeps echoing 32 KiB a second (then they leave: Linux resets them). Every peer's
# connection closes before the next one starts.
# Pass: every echo byte-exact, the node stays up and answers ping, zero-window probes
# counted, the live connection keeps echoing next to the never-reading peers, a new
# connection works once they left, RSS grows by less than 32 MiB.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
HS_PHASE_SECS=150 hs_test peers 198.18.46 7306 32768 --never-readers 4
