#!/usr/bin/env bash
# TSO from a vhost endpoint: a wharf-perf echo server on net_vhost (tso=1) and a client on
# virtio-user, connected directly (the bench's pair). net_vhost lists no TSO, but once its
# guest (the client, with LRO) negotiated GUEST_TSO4 the server's TCP-lite sends segments
# of up to 64 KiB, handed to the guest as virtio GSO. Shown: echoes of 64 B (a stream of
# 40,000, up to 1024 in flight) and of 1 MiB arrive intact and all counted (--verify
# --count); the server's port sent frames averaging above the MTU (TSO in use, from
# /wharf/dn/stats); and with WHARF_TSO=0 on the server the same echoes pass with MTU-sized
# frames only.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init

# run_pair TAG [server env...]: server up, the two echo runs, the server's tx counters.
run_pair() {
	local tag=$1 sock=$TB_DIR/pair-$1.sock; shift
	env "$@" "$TB_BUILD/wharf-perf" $(tb_eal "srv$tag" | sed -E "s/^-l [0-9]+/-l $(tb_core 1)/") --vdev=net_vhost0,iface=$sock,queues=1,tso=1 -- \
		--ip 198.18.3.2/24 --server --port 7000 --echo --seconds 60 \
		>"$TB_DIR/srv$tag.out" 2>"$TB_DIR/srv$tag.log" &
	TB_PIDS[srv$tag]=$!
	tb_wait_log "$TB_DIR/srv$tag.log" "server on port" 20 || tb_fail "$tag: server did not come up"
	local size count
	for size in 64 1048576; do
		count=$([ $size = 64 ] && echo 40000 || echo 40)
		timeout --kill-after=5 40 "$TB_BUILD/wharf-perf" $(tb_eal "cli$tag") \
			--vdev=virtio_user0,path=$sock,queues=1,queue_size=1024 -- --ip 198.18.3.1/24 \
			--peer 198.18.3.2 --port 7000 --mode stream --size $size --echo --verify \
			--count $count --seconds 30 >"$TB_DIR/cli$tag$size.out" 2>"$TB_DIR/cli$tag$size.log" \
			|| { tail -n 5 "$TB_DIR/cli$tag$size.log" >&2; tb_fail "$tag: $size B client failed"; }
		local out=$TB_DIR/cli$tag$size.out
		[ "$(tb_json "$out" msgs)" = "$count" ] || tb_fail "$tag: $size B: $(tb_json "$out" msgs) echoes of $count"
		[ "$(tb_json "$out" errors)" = 0 ] || tb_fail "$tag: $size B: client errors"
		[ "$(tb_json "$out" corrupt)" = 0 ] || tb_fail "$tag: $size B: corrupt echoes"
	done
	STATS=$(echo "/wharf/dn/stats,0" | timeout 10 dpdk-telemetry.py -f "wharf-$TB_ID-srv$tag" 2>&1)
	TXP=$(echo "$STATS" | grep -o '"tx_pkts": [0-9]*' | grep -o '[0-9]*$')
	TXB=$(echo "$STATS" | grep -o '"tx_bytes": [0-9]*' | grep -o '[0-9]*$')
	[ "${TXP:-0}" -gt 0 ] || tb_fail "$tag: no tx counters from telemetry: $(echo "$STATS" | tail -n 1 | cut -c1-200)"
	tb_stop "srv$tag"
	[ "$(tb_json "$TB_DIR/srv$tag.out" errors)" = 0 ] || tb_fail "$tag: server errors"
}

run_pair tso
avg=$((TXB / TXP))
[ "$avg" -gt 1514 ] || tb_fail "vhost side sent $TXP frames averaging $avg B: no TSO"
tb_pass "TSO from the vhost side: 40,000 x 64 B and 40 x 1 MiB echoed intact; $TXP frames averaging $avg B"
run_pair notso WHARF_TSO=0
avg=$((TXB / TXP))
[ "$avg" -le 1514 ] || tb_fail "WHARF_TSO=0: frames averaging $avg B"
tb_pass "WHARF_TSO=0: the same echoes intact with frames averaging $avg B"
