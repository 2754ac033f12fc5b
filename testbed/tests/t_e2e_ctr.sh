#!/usr/bin/env bash
# The sparse CTR model end to end over protocol dpdk (1 PS + 2 workers on the switch): LR over
# hashed ids on a sparse table, async, judged against the generator's Bayes AUC (looser than
# the full run's 0.01: this run is about 3x shorter). It once stalled in the evaluation's many
# 50 KB pulls: virtio never freed the sent mbufs on a quiet link, so zero-copy replies never
# completed (dpdk_net now reclaims them on an idle lcore).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47780=10.77.0.1:6666\n127.0.0.1:47781=10.77.0.2:5555\n127.0.0.1:47782=10.77.0.3:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47780 --workers 127.0.0.1:47781,127.0.0.1:47782 --endpoint-map $MAP --protocol dpdk --wait-timeout 30 --retry-interval 1"

job() { # NAME MODE KEY MIN MODEL-ARGS...
	local name=$1 mode=$2 key=$3 min=$4; shift 4
	tb_switch 3 || tb_fail "switch"
	tb_node ps-$name 0 train $CL --mode "$mode" --role ps "$@"
	for i in 0 1; do tb_node w$i-$name $((i + 1)) train $CL --mode "$mode" --role worker --task-index $i "$@"; done
	for _ in $(seq 1 60); do
		kill -0 "${TB_PIDS[w0-$name]}" 2>/dev/null || kill -0 "${TB_PIDS[w1-$name]}" 2>/dev/null || break
		sleep 1
	done
	"$TB_BUILD/wharf-ctl" 127.0.0.1:47780 shutdown >/dev/null
	for n in w0-$name w1-$name ps-$name switch; do tb_stop "$n"; done
	for i in 0 1; do
		local out=$TB_DIR/w$i-$name.out v
		grep -q "\"mode\":\"$mode\"" "$out" || { tail -n 8 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker $i did not finish"; }
		v=$(tb_json "$out" "$key")
		[ "$(echo "$v $min" | awk '{print ($1 >= $2)}')" = 1 ] || tb_fail "$name: worker $i $key $v < $min"
	done
	tb_pass "$name ($mode, dpdk): $key $(tb_json "$TB_DIR/w0-$name.out" "$key"), $(tb_json "$TB_DIR/w0-$name.out" samples_per_s) samples/s per worker"
}

job ctr-lr async test_auc 0.70 --model lr --ctr-samples 100000 --epochs 2
# the CTR gap to Bayes, looser than the full run's 0.01 because the run is 3x shorter
gap=$(tb_json "$TB_DIR/w0-ctr-lr.out" auc_gap)
[ "$(echo "$gap" | awk '{print ($1 <= 0.05)}')" = 1 ] || tb_fail "ctr-lr: AUC gap to Bayes $gap > 0.05"
tb_pass "ctr-lr: AUC gap to Bayes $gap"
