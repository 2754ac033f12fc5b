#!/usr/bin/env bash
# Sleeping mode must not lose wake-ups: a wharf-perf ping-pong pair, both sleeping (no
# --poll) and both on the same core (the harshest case: every message needs the other
# process woken), server on net_vhost, client on virtio-user. A frame that arrives between
# the last empty Rx burst and arming the Rx interrupt raises no event; if the lcore sleeps
# anyway it waits out the 1 ms interrupt timeout (virtio implements no
# rte_eth_rx_queue_count, so the look before sleeping is a real Rx burst: dn_rx_recheck).
# With wake-ups lost the p99 sits at the timeout (1.1 ms against a p50 of 25 us, measured);
# without, tens of microseconds. The bound, 300 us, leaves room for a shared machine's
# scheduling and none for a timeout. And the p99 must stay within 3x the p50: a sleep's
# 1 ms timeout that reprograms the CPU's timer (a hypervisor exit on a VM) at every arm and
# cancel made a third of the round trips 25-35 us against a 5 us p50 (p99 28 us, 5.4x);
# the widened timer slack of a sleep (dn_sleep_slack_begin) gives 6-7 us.
#
# The library's network thread sleeps too, and an application thread hands it requests
# through a ring and tl_wake. A poll that went back to sleep after such a wake-up sent each
# request only when its 1 ms poll timeout ended: one small Python push or pull at a time
# through the switch took 1.2 ms at p50 (kernel TCP: 0.08 ms). The p50 bound, 600 us, is
# half the timeout's cost and several times a sound path's.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init

pair() { # TAG SERVER-CORE CLIENT-CORE
	local tag=$1 sock=$TB_DIR/pair-$1.sock out p50 p99 msgs
	"$TB_BUILD/wharf-perf" $(TB_EAL_CORE=$2 tb_eal "srv$tag") --vdev=net_vhost0,iface=$sock,queues=1 -- \
		--ip 198.18.3.2/24 --server --port 7000 --echo --seconds 60 \
		>"$TB_DIR/srv$tag.out" 2>"$TB_DIR/srv$tag.log" &
	TB_PIDS[srv$tag]=$!
	tb_wait_log "$TB_DIR/srv$tag.log" "server on port" 20 || tb_fail "$tag: server did not come up"
	out=$TB_DIR/cli$tag.out
	timeout --kill-after=5 40 "$TB_BUILD/wharf-perf" $(TB_EAL_CORE=$3 tb_eal "cli$tag") \
		--vdev=virtio_user0,path=$sock,queues=1,queue_size=1024 -- --ip 198.18.3.1/24 \
		--peer 198.18.3.2 --port 7000 --size 64 --seconds 3 >"$out" 2>"$TB_DIR/cli$tag.log" \
		|| { tail -n 5 "$TB_DIR/cli$tag.log" >&2; tb_fail "$tag: client failed"; }
	tb_stop "srv$tag"
	p50=$(tb_json "$out" rtt_p50_us) p99=$(tb_json "$out" rtt_p99_us) msgs=$(tb_json "$out" msgs)
	[ -n "$p50" ] && [ -n "$p99" ] && [ -n "$msgs" ] || { cat "$out" >&2; tb_fail "$tag: no RTT figures"; }
	awk -v a="$p99" 'BEGIN { exit !(a < 300) }' ||
		tb_fail "$tag: sleeping RTT p99 $p99 us (p50 $p50 us, $msgs messages): wake-ups lost"
	awk -v a="$p99" -v b="$p50" 'BEGIN { exit !(a <= 3 * b) }' ||
		tb_fail "$tag: sleeping RTT p99 $p99 us is more than 3x the p50 $p50 us ($msgs messages)"
	tb_pass "$tag: sleeping 64 B ping-pong, p50 $p50 us, p99 $p99 us, $msgs messages in 3 s"
}

pair same-core 0 0

# The Python binding through the switch, PS and worker sleeping, pinned as the demo pins them.
api() {
	local base=48920 map=$TB_DIR/api.map cl out p50s p50l
	printf '127.0.0.1:%s=198.19.0.1:6666\n127.0.0.1:%s=198.19.0.2:5555\n' $base $((base + 1)) >"$map"
	cl=(--ps 127.0.0.1:$base --workers 127.0.0.1:$((base + 1)) --endpoint-map "$map"
	    --protocol dpdk --mode async --ps-cores 1)
	tb_switch 2 || tb_fail "api: switch"
	TB_PIN=1 tb_pynode api-ps 0 "$TB_ROOT/testbed/api_rtt.py" "${cl[@]}" --role ps
	TB_PIN=1 tb_pynode api-w 1 "$TB_ROOT/testbed/api_rtt.py" "${cl[@]}" --role worker \
		--task-index 0 --n 200
	for _ in $(seq 1 60); do kill -0 "${TB_PIDS[api-w]}" 2>/dev/null || break; sleep 1; done
	wait "${TB_PIDS[api-w]}" || { tail -n 5 "$TB_DIR/api-w.log" >&2; tb_fail "api: worker failed"; }
	tb_stop api-ps
	tb_stop switch
	out=$TB_DIR/api-w.out
	p50s=$(tb_json "$out" push_small_p50_us) p50l=$(tb_json "$out" pull_small_p50_us)
	awk -v a="$p50s" -v b="$p50l" 'BEGIN { exit !(a < 600 && b < 600) }' ||
		tb_fail "api: one-frame request p50 push $p50s us, pull $p50l us: the network thread slept through its wake-ups"
	tb_pass "api: Python one-frame request through the switch, p50 push $p50s us, pull $p50l us"
}

api
