#!/usr/bin/env bash
# The non-polling idle mode really sleeps: an idle wharf node on virtio-user (Rx interrupts)
# uses under 5% of a core over 5 s, and still answers pings right after.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
tb_switch 2 || tb_fail switch
tb_node idle 1 ping --ip 198.18.0.2/24
tb_wait_log "$TB_DIR/idle.log" "up on port" 20 || tb_fail "node did not come up"
sleep 1
pid=${TB_PIDS[idle]}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
t0=$(ticks "$pid"); s0=$(ticks "${TB_PIDS[switch]}")
sleep 5
t1=$(ticks "$pid"); s1=$(ticks "${TB_PIDS[switch]}")
node_pct=$(awk -v d=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.2f", 100 * d / hz / 5 }')
sw_pct=$(awk -v d=$((s1 - s0)) -v hz="$hz" 'BEGIN { printf "%.2f", 100 * d / hz / 5 }')
echo "idle node: $node_pct% of a core; idle switch: $sw_pct%"
awk -v p="$node_pct" 'BEGIN { exit !(p < 5) }' || tb_fail "idle node used $node_pct% of a core"
awk -v p="$sw_pct" 'BEGIN { exit !(p < 5) }' || tb_fail "idle switch used $sw_pct% of a core"
tb_run client 0 30 ping --ip 198.18.0.1/24 --peer 198.18.0.2 --count 20 --interval-us 10000 \
	|| tb_fail "client exited non-zero"
cat "$TB_DIR/client.out"
[ "$(tb_json "$TB_DIR/client.out" received)" = 20 ] || tb_fail "the sleeping node did not answer"
tb_pass "idle node $node_pct% CPU, still answers (p50 $(tb_json "$TB_DIR/client.out" rtt_p50_us) us)"
