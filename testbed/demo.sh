#!/usr/bin/env bash
# make demo — the Fashion-MNIST MLP on a parameter server, twice: first over DPDK (TCP-lite on
# virtio-user through the testbed switch), then over the kernel's TCP, side by side.
#
# 1 PS + 2 workers (wharf-train, roles from flags; the same cluster with protocol=dpdk|kernel),
# sync mode, non-polling (the machine has 2 cores). Worker 0's progress bar is shown per epoch.
# Everything started here is torn down on exit, failure or Ctrl-C (tb.sh's trap). The LAST line
# is one JSON object:
#   {"dpdk":{"test_accuracy":..,"samples_per_s":..},"kernel":{"test_accuracy":..,"samples_per_s":..}}
# Knobs (environment): DEMO_EPOCHS (10), DEMO_BATCH (64), DEMO_LR (0.1), DEMO_TRAIN_LIMIT (all),
# DEMO_PROTOCOLS ("dpdk kernel"), DEMO_TIMEOUT (seconds per run, 900), WHARF_MEM (huge|no-huge).
set -u
. "$(dirname "$0")/cluster/tb.sh"

EPOCHS=${DEMO_EPOCHS:-10}
BATCH=${DEMO_BATCH:-64}
LR=${DEMO_LR:-0.1}
LIMIT=${DEMO_TRAIN_LIMIT:-}
PROTOCOLS=${DEMO_PROTOCOLS:-dpdk kernel}
RUN_TIMEOUT=${DEMO_TIMEOUT:-900}
declare -A ACC=() SPS=() SECS=()

tb_init
T0=$(date +%s)

# One run: PROTO BASEPORT. Sets ACC/SPS/SECS[PROTO].
demo_run() {
	local proto=$1 base=$2 psc wc0 wc1 flags map=$TB_DIR/.endpoint_map t0 t1 i
	psc=127.0.0.1:$base; wc0=127.0.0.1:$((base + 1)); wc1=127.0.0.1:$((base + 2))
	printf '%s=10.77.0.1:6666\n%s=10.77.0.2:5555\n%s=10.77.0.3:5555\n' "$psc" "$wc0" "$wc1" >"$map"
	flags="--ps $psc --workers $wc0,$wc1 --endpoint-map $map --protocol $proto --mode sync"
	local train="--model mlp --epochs $EPOCHS --batch $BATCH --lr $LR ${LIMIT:+--train-limit $LIMIT}"
	echo
	echo "=== $proto: 1 PS + 2 workers, Fashion-MNIST MLP 784-128-10, sync, $EPOCHS epochs, batch $BATCH per worker"
	if [ "$proto" = dpdk ]; then
		tb_switch 3 || tb_fail "the switch did not start"
	fi
	tb_node ps-$proto 0 train $flags --role ps --model mlp --lr "$LR"
	t0=$(date +%s.%N)
	tb_node w0-$proto 1 train $flags --role worker --task-index 0 $train
	tb_node w1-$proto 2 train $flags --role worker --task-index 1 $train
	# Worker 0's progress, live, until both workers are done.
	local shown=0 lines
	for i in $(seq 1 "$RUN_TIMEOUT"); do
		lines=$(grep -cE '^(epoch|  )' "$TB_DIR/w0-$proto.out" 2>/dev/null)
		if [ "${lines:-0}" -gt "$shown" ]; then
			grep -E '^(epoch|  )' "$TB_DIR/w0-$proto.out" | sed -n "$((shown + 1)),${lines}p"
			shown=$lines
		fi
		kill -0 "${TB_PIDS[w0-$proto]}" 2>/dev/null || kill -0 "${TB_PIDS[w1-$proto]}" 2>/dev/null || break
		sleep 1
	done
	t1=$(date +%s.%N)
	grep -E '^(epoch|  )' "$TB_DIR/w0-$proto.out" 2>/dev/null | sed -n "$((shown + 1)),\$p"
	"$TB_BUILD/wharf-ctl" "$psc" status 2>/dev/null | sed 's/^/    /' | head -n 8
	"$TB_BUILD/wharf-ctl" "$psc" shutdown >/dev/null 2>&1
	for n in w0-$proto w1-$proto ps-$proto; do tb_stop "$n"; done
	[ "$proto" = dpdk ] && tb_stop switch
	local j0 j1
	j0=$(grep '^{' "$TB_DIR/w0-$proto.out" | tail -n 1); j1=$(grep '^{' "$TB_DIR/w1-$proto.out" | tail -n 1)
	if [ -z "$j0" ] || [ -z "$j1" ]; then
		tail -n 15 "$TB_DIR/w0-$proto.log" "$TB_DIR/w1-$proto.log" "$TB_DIR/ps-$proto.log" >&2
		TB_KEEP_LOGS=1
		ACC[$proto]=null; SPS[$proto]=null; SECS[$proto]=$(echo "$t1 - $t0" | bc)
		tb_log "$proto: a worker did not finish (logs kept)"
		return 1
	fi
	ACC[$proto]=$(tb_json "$TB_DIR/w0-$proto.out" test_accuracy)
	local s0 s1
	s0=$(tb_json "$TB_DIR/w0-$proto.out" samples_per_s)
	s1=$(tb_json "$TB_DIR/w1-$proto.out" samples_per_s)
	SPS[$proto]=$(echo "$s0 + $s1" | bc)
	SECS[$proto]=$(printf '%.1f' "$(echo "$t1 - $t0" | bc)")
	echo "--- $proto: test accuracy ${ACC[$proto]}, ${SPS[$proto]} samples/s (both workers), ${SECS[$proto]} s"
}

rc=0
base=47600
for p in $PROTOCOLS; do
	demo_run "$p" "$base" || rc=1
	base=$((base + 10))
done

echo
echo "=== comparison (same machine, same job; samples/s summed over the 2 workers)"
printf '%-8s %14s %14s %10s\n' protocol test_accuracy samples_per_s seconds
for p in $PROTOCOLS; do
	printf '%-8s %14s %14s %10s\n' "$p" "${ACC[$p]}" "${SPS[$p]}" "${SECS[$p]}"
done
echo "total $(( $(date +%s) - T0 )) s"
tb_cleanup
printf '{"dpdk":{"test_accuracy":%s,"samples_per_s":%s},"kernel":{"test_accuracy":%s,"samples_per_s":%s}}\n' \
	"${ACC[dpdk]:-null}" "${SPS[dpdk]:-null}" "${ACC[kernel]:-null}" "${SPS[kernel]:-null}"
exit $rc
