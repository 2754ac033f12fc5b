#!/usr/bin/env bash
# make demo — a PyTorch training script on wharf's parameter server, twice: the Fashion-MNIST
# MLP of python/examples/mlp_fmnist.py, first over DPDK (TCP-lite on virtio-user through the
# testbed switch), then over the kernel's TCP, side by side.
#
# 1 PS + 2 workers, each its own /usr/bin/python3 process (roles from flags; the same cluster
# with protocol=dpdk|kernel), sync mode, non-polling (the machine has 2 cores), the PS on one
# lane, every process pinned alike on both protocols (EAL -l, taskset). Each worker's
# progress bar is shown live (a line per update when the output is not a terminal), worker 0's
# test accuracy after each epoch. Everything started here is torn down on exit, failure or
# Ctrl-C (tb.sh's trap). The LAST line is one JSON object:
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
SCRIPT=$TB_ROOT/python/examples/mlp_fmnist.py
declare -A ACC=() SPS=() SECS=()

ls "$TB_BUILD"/python/wharf/_wharf.*.so >/dev/null 2>&1 ||
	{ tb_log "the Python package is not built (make python needs python3-dev: make deps)"; exit 1; }
tb_init
T0=$(date +%s)
export TB_PIN=1
# Workers print a progress line 20 times an epoch when not on a terminal (ours reads them).
export EX_PROGRESS_LINES=20

# The workers' progress until they exit (at most RUN_TIMEOUT s), read with the shell's own
# `read` from a descriptor kept open on each worker's output: no process per look but the
# quarter-second sleep (a wc, sed and grep per worker at every look cost about a tenth of a
# core, taken from the job). On a terminal: epoch ends and test accuracies scroll, and the last line of
# each worker is redrawn below them; otherwise every line as it comes.
show_progress() { # NODE...
	local tty=0 drawn=0 alive n i f line
	declare -A fd=() part=() last=()
	[ -t 1 ] && tty=1
	for i in $(seq 1 $((RUN_TIMEOUT * 4))); do
		alive=0
		for n in "$@"; do kill -0 "${TB_PIDS[$n]}" 2>/dev/null && alive=1; done
		[ $tty = 1 ] && [ $drawn -gt 0 ] && printf '\033[%dA\033[J' "$drawn"
		for n in "$@"; do
			if [ -z "${fd[$n]:-}" ]; then
				[ -f "$TB_DIR/$n.out" ] || continue
				exec {f}<"$TB_DIR/$n.out"
				fd[$n]=$f
			fi
			while IFS= read -r -u "${fd[$n]}" line; do
				line=${part[$n]:-}$line
				part[$n]=
				[[ $line == '{'* ]] && continue
				if [ $tty = 0 ]; then
					printf '%s\n' "$line"
					continue
				fi
				[[ $line == *100%* || $line == *'test accuracy'* ]] && printf '%s\n' "$line"
				[[ $line =~ ^w[0-9]+\ epoch ]] && last[$n]=$line
			done
			part[$n]=${part[$n]:-}$line # a line still being written: read on next time
		done
		drawn=0
		if [ $tty = 1 ] && [ $alive = 1 ]; then
			for n in "$@"; do
				[ -n "${last[$n]:-}" ] && [[ ${last[$n]} != *100%* ]] || continue
				printf '%s\n' "${last[$n]}"
				drawn=$((drawn + 1))
			done
		fi
		[ $alive = 0 ] && break
		sleep 0.25
	done
	for n in "${!fd[@]}"; do
		f=${fd[$n]}
		exec {f}<&-
	done
}

# One run: PROTO BASEPORT. Sets ACC/SPS/SECS[PROTO].
demo_run() {
	local proto=$1 base=$2 psc wc0 wc1 flags map=$TB_DIR/.endpoint_map t0 t1
	psc=127.0.0.1:$base; wc0=127.0.0.1:$((base + 1)); wc1=127.0.0.1:$((base + 2))
	printf '%s=198.19.0.1:6666\n%s=198.19.0.2:5555\n%s=198.19.0.3:5555\n' "$psc" "$wc0" "$wc1" >"$map"
	flags=(--ps "$psc" --workers "$wc0,$wc1" --endpoint-map "$map" --protocol "$proto" --mode sync
		--ps-cores 1 --lr "$LR")
	local train=(--epochs "$EPOCHS" --batch "$BATCH" ${LIMIT:+--train-limit "$LIMIT"})
	echo
	echo "=== $proto: 1 PS + 2 workers, PyTorch MLP 784-128-10 on Fashion-MNIST, sync, $EPOCHS epochs, batch $BATCH per worker"
	if [ "$proto" = dpdk ]; then
		tb_switch 3 || tb_fail "the switch did not start"
	fi
	tb_pynode ps-$proto 0 "$SCRIPT" "${flags[@]}" --role ps
	t0=$(date +%s.%N)
	tb_pynode w0-$proto 1 "$SCRIPT" "${flags[@]}" --role worker --task-index 0 "${train[@]}"
	tb_pynode w1-$proto 2 "$SCRIPT" "${flags[@]}" --role worker --task-index 1 "${train[@]}"
	show_progress w0-$proto w1-$proto
	t1=$(date +%s.%N)
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
if [[ "${SPS[dpdk]:-null}" != null && "${SPS[kernel]:-null}" != null ]]; then
	printf 'samples/s dpdk/kernel: %.3f\n' "$(echo "scale=4; ${SPS[dpdk]} / ${SPS[kernel]}" | bc)"
	echo "how each ran: both sleeping when idle, pinned alike; dpdk sends every frame through the"
	echo "testbed's software switch (one more process waking on these 2 cores), kernel TCP over"
	echo "loopback. On NIC hosts each node has the wire to itself: see docs/benchmarks.md."
fi
echo "total $(( $(date +%s) - T0 )) s"
tb_cleanup
printf '{"dpdk":{"test_accuracy":%s,"samples_per_s":%s},"kernel":{"test_accuracy":%s,"samples_per_s":%s}}\n' \
	"${ACC[dpdk]:-null}" "${SPS[dpdk]:-null}" "${ACC[kernel]:-null}" "${SPS[kernel]:-null}"
exit $rc
