#!/usr/bin/env bash
# Hostile traffic 1/5: malformed frames of every layer against a live wharf node on a TAP
# (testbed/hostile/hostile.py malformed). While a Linux client keeps a connection echoing
# through wharf-perf --server --echo, every variant (other ethertypes and MACs; ARP short,
# of another hardware type or opcode, from a multicast MAC, or for another address; bad IPv4
# version, IHL, total length, checksum, TTL, destination; fragments; ICMP truncated, bad
# checksum, unknown type; bad TCP checksums; data offset 0/4/past the packet; options
# running past the header or with bad lengths; impossible flag sets; port 0; land) is sent
# 10 times, aimed at the live tuple with an exact-sequence RST or data as payload.
# Pass: the node stays up and exits cleanly, the live stream's echo is byte-exact
# (SHA-256), no RST on the live tuple, a new connection works afterwards, each drop reason
# counts at least what was sent for it, RSS grows by less than 8 MiB.
# (Truncated Ethernet frames cannot be sent: AF_PACKET refuses frames below 14 bytes.)
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
. "$TB_ROOT/testbed/hostile/hs.sh"
hs_test malformed 198.18.41 7301 8192 --reps 10
