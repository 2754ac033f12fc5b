#!/usr/bin/env bash
# Each consistency mode end to end over protocol dpdk (1 PS + 2 workers on the switch): the
# dense softmax model in sync, async and GEO (the sparse CTR model: t_e2e_ctr.sh). Short runs with thresholds they reliably reach; the full-accuracy runs
# are `make demo` and testbed/e2e_full.sh.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47760=10.77.0.1:6666\n127.0.0.1:47761=10.77.0.2:5555\n127.0.0.1:47762=10.77.0.3:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47760 --workers 127.0.0.1:47761,127.0.0.1:47762 --endpoint-map $MAP --protocol dpdk --wait-timeout 30 --retry-interval 1"

job() { # NAME MODE KEY MIN MODEL-ARGS...
	local name=$1 mode=$2 key=$3 min=$4; shift 4
	tb_switch 3 || tb_fail "switch"
	tb_node ps-$name 0 train $CL --mode "$mode" --role ps "$@"
	for i in 0 1; do tb_node w$i-$name $((i + 1)) train $CL --mode "$mode" --role worker --task-index $i "$@"; done
	for _ in $(seq 1 120); do
		kill -0 "${TB_PIDS[w0-$name]}" 2>/dev/null || kill -0 "${TB_PIDS[w1-$name]}" 2>/dev/null || break
		sleep 1
	done
	"$TB_BUILD/wharf-ctl" 127.0.0.1:47760 shutdown >/dev/null
	for n in w0-$name w1-$name ps-$name switch; do tb_stop "$n"; done
	for i in 0 1; do
		local out=$TB_DIR/w$i-$name.out v
		grep -q "\"mode\":\"$mode\"" "$out" || { tail -n 8 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker $i did not finish"; }
		v=$(tb_json "$out" "$key")
		[ "$(echo "$v $min" | awk '{print ($1 >= $2)}')" = 1 ] || tb_fail "$name: worker $i $key $v < $min"
	done
	tb_pass "$name ($mode, dpdk): $key $(tb_json "$TB_DIR/w0-$name.out" "$key"), $(tb_json "$TB_DIR/w0-$name.out" samples_per_s) samples/s per worker"
}

D="--model softmax --epochs 2 --train-limit 12000 --test-limit 2000"
job sync sync test_accuracy 0.76 $D
job async async test_accuracy 0.72 $D
job geo geo test_accuracy 0.72 $D --geo-k 4
