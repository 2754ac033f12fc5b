#!/usr/bin/env bash
# Dependencies point down only (docs/architecture.md, "Layers"): every layer's sources include
# headers of their own layer and of the layers below, never above; ps_core (its network side
# included) starts no EAL, port or lcore and opens no socket itself: it uses transport's lanes
# and connections, and DPDK only as libraries (ring, telemetry, CRC, log). Reads the tree, no
# build, no network, a second.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
cd "$TB_ROOT" || tb_fail "no tree at $TB_ROOT"

# layer -> the folders its sources may include from (besides system headers)
allowed() {
	case $1 in
	dpdk_net) echo "dpdk_net" ;;
	transport) echo "transport dpdk_net" ;;
	fuse) echo "fuse transport dpdk_net" ;;
	ps_core) echo "ps_core fuse transport dpdk_net/dn_log.h" ;;
	api) echo "api ps_core fuse transport dpdk_net/dn_log.h wharf" ;;
	apps/common) echo "apps/common ps_core fuse transport dpdk_net" ;;
	esac
}
bad=0
for layer in dpdk_net transport fuse ps_core api apps/common; do
	ok=$(allowed "$layer")
	while IFS=: read -r file line inc; do
		hit=0
		case $inc in */*) ;; *) hit=1 ;; esac # the file's own folder
		for a in $ok; do
			case $inc in "$a"/*|"$a") hit=1 ;; esac
		done
		[ $hit -eq 1 ] || { echo "$file:$line: includes \"$inc\" (a layer above, or not below)" >&2; bad=1; }
	done < <(grep -nE '^#include "' "$layer"/*.c "$layer"/*.h 2>/dev/null |
		sed -E 's/^([^:]+):([0-9]+):#include "([^"]+)".*/\1:\2:\3/')
done
# ps_core: DPDK's libraries, never its environment; the transport's sockets, never its own.
while IFS= read -r hit; do
	echo "$hit: ps_core must go through transport (tl_lanes_*, tl_*)" >&2; bad=1
done < <(grep -nE '#include <rte_(eal|ethdev|lcore|launch|mbuf|mempool)\.h>|\brte_eal_[a-z_]+\(|\brte_lcore_[a-z_]+\(|\bdn_(eal|port|lcore|tx|arp|obs)_[a-z_]+\(|\b(socket|epoll_create1|epoll_wait|accept4?|bind|listen)\(' ps_core/*.c ps_core/*.h)
[ $bad -eq 0 ] || tb_fail "layering broken (lines above)"
tb_pass "every layer includes only itself and the layers below; ps_core brings up no EAL, port, lcore or socket"
