#!/usr/bin/env bash
# testbed/e2e_full.sh — every model (softmax, MLP, CTR LR and FM) to its accuracy mark in
# every consistency mode: the longer run behind the short checks of tests/t_e2e_modes.sh and
# t_e2e_ctr.sh.
#
#   testbed/e2e_full.sh [--protocol dpdk|kernel] [--only NAME[,NAME..]] [--list] [-h]
#
# Each job is 1 PS + 2 workers of build/wharf-train (roles from flags, the cluster of
# testbed/demo.sh; over dpdk on the testbed switch, virtio-user), one (model, mode) pair:
#   softmax  Fashion-MNIST softmax regression   test_accuracy >= 0.83
#   mlp      Fashion-MNIST MLP 784-128-10       test_accuracy >= 0.87
#   lr       CTR logistic regression (hashed)   auc_gap <= 0.01 (generator's Bayes AUC - test AUC)
#   fm       CTR factorization machine, k=4     auc_gap <= 0.01
# in sync, async and geo: 12 jobs. Each worker evaluates the model it pulls after its last step;
# a job's value is that of the worker that exited last (its pull saw every push of both: the
# trained model), the worse of the two when they exited together. A worker that finished early
# in async evaluated a model the other was still training (full lr, mid-epoch); the row's log
# line shows both. NAME for --only is a model, a mode or MODEL-MODE (mlp-geo).
#
# Output: one row per job (model, mode, metric, value, mark, ok, seconds: wall time of the job
# from the PS's start to the last worker's exit), then a LAST line that is one JSON object:
#   {"protocol":..,"all_ok":..,"seconds":..,"jobs":[{"model":..,"mode":..,"metric":..,
#    "value":..,"cmp":">="|"<=","mark":..,"ok":..,"seconds":..},..]}
# Exit 0 only when every job that ran reached its mark. Every process is bounded (E2E_TIMEOUT
# seconds per job, default 300) and torn down after its job, on failure and on Ctrl-C (tb.sh's
# trap); a failed job's logs are kept under build/test-logs/. Settings per job are in JOBS
# below, measured in testbed/e2e_full.md; E2E_SEED (default 1) changes data order and CTR data;
# E2E_EXTRA_ARGS is appended to every selected job's trainer flags (the later flag wins), to
# try other settings: E2E_EXTRA_ARGS="--geo-k 4" testbed/e2e_full.sh --only geo.
set -u
. "$(dirname "$0")/cluster/tb.sh"

usage() {
	sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
	echo "jobs:"; list_jobs | sed 's/^/  /'
}

# name model mode metric cmp mark  trainer args (the PS gets the same: tables follow the model)
# Settings start from the models' author's (softmax lr 0.1 batch 64, 8-10 epochs; MLP lr 0.1
# batch 64, 10 epochs, last 2 at 0.3x lr; CTR 300k samples, 3 epochs, batch 256, lr 2 LR / 1 FM
# over 1/(1+epoch)), with more margin where it was thin (testbed/e2e_full.md): softmax and MLP
# end with 3 decayed epochs (MLP 12 epochs); CTR draws 1M samples (at 300k FM in GEO missed by
# 0.0001-0.001). GEO pushes every 10 local steps (the trainer's default).
JOBS=$(cat <<'EOF'
softmax-sync  softmax sync  test_accuracy >= 0.83 --epochs 10 --decay-epochs 3 --batch 64 --lr 0.1
softmax-async softmax async test_accuracy >= 0.83 --epochs 10 --decay-epochs 3 --batch 64 --lr 0.1
softmax-geo   softmax geo   test_accuracy >= 0.83 --epochs 10 --decay-epochs 3 --batch 64 --lr 0.1 --geo-k 10
mlp-sync      mlp     sync  test_accuracy >= 0.87 --epochs 12 --decay-epochs 3 --batch 64 --lr 0.1
mlp-async     mlp     async test_accuracy >= 0.87 --epochs 12 --decay-epochs 3 --batch 64 --lr 0.1
mlp-geo       mlp     geo   test_accuracy >= 0.87 --epochs 12 --decay-epochs 3 --batch 64 --lr 0.1 --geo-k 10
lr-sync       lr      sync  auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 2
lr-async      lr      async auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 2
lr-geo        lr      geo   auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 2 --geo-k 10
fm-sync       fm      sync  auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 1 --fm-k 4
fm-async      fm      async auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 1 --fm-k 4
fm-geo        fm      geo   auc_gap       <= 0.01 --ctr-samples 1000000 --epochs 3 --batch 256 --lr 1 --fm-k 4 --geo-k 10
EOF
)

list_jobs() { echo "$JOBS" | awk '{ printf "%-14s %s %s %s", $1, $4, $5, $6; for (i = 7; i <= NF; i++) printf " %s", $i; print "" }'; }

PROTO=dpdk
ONLY=
while [ $# -gt 0 ]; do
	case $1 in
	--protocol) PROTO=${2:-}; shift 2 ;;
	--protocol=*) PROTO=${1#*=}; shift ;;
	--only) ONLY=${2:-}; shift 2 ;;
	--only=*) ONLY=${1#*=}; shift ;;
	--list) list_jobs; exit 0 ;;
	-h|--help) usage; exit 0 ;;
	*) echo "e2e_full.sh: unknown argument '$1' (expected --protocol dpdk|kernel, --only NAME, --list)" >&2; exit 2 ;;
	esac
done
case $PROTO in
dpdk|kernel) ;;
*) echo "e2e_full.sh: --protocol: expected dpdk or kernel, got '$PROTO'" >&2; exit 2 ;;
esac

# selected NAME MODEL MODE: whether --only picks this job.
selected() {
	local w
	[ -z "$ONLY" ] && return 0
	for w in ${ONLY//,/ }; do
		[ "$w" = "$1" ] || [ "$w" = "$2" ] || [ "$w" = "$3" ] && return 0
	done
	return 1
}
if [ -n "$ONLY" ]; then
	for w in ${ONLY//,/ }; do
		echo "$JOBS" | awk -v w="$w" '$1 == w || $2 == w || $3 == w { f = 1 } END { exit !f }' ||
			{ echo "e2e_full.sh: --only: '$w' names no job (see --list)" >&2; exit 2; }
	done
fi

JOB_TIMEOUT=${E2E_TIMEOUT:-300}
SEED=${E2E_SEED:-1}
ROWS=()
JSON=()
ALL_OK=true

# worse CMP VALUES..: the worse of the workers' values (min for >=, max for <=); "null" if missing.
worse() {
	local cmp=$1; shift
	printf '%s\n' "$@" | awk -v c="$cmp" '
		!/^-?[0-9.]+(e-?[0-9]+)?$/ { bad = 1; next }
		{ if (n++ == 0 || (c == ">=" ? $1 < w : $1 > w)) w = $1 }
		END { if (bad || n == 0) print "null"; else print w }'
}

# final_value CMP END0 END1 V0 V1: the value of the worker that exited last (its final pull came
# after every push of both); the worse of the two when they exited within 0.5 s of each other
# (sync: the same model) or when either is missing (a worker that did not finish fails the job).
final_value() {
	local cmp=$1 e0=$2 e1=$3 v0=$4 v1=$5
	if [ "$v0" = missing ] || [ "$v1" = missing ]; then
		echo null
		return
	fi
	case $(awk -v a="${e0:-0}" -v b="${e1:-0}" 'BEGIN { print (a > b + 0.5) ? 0 : (b > a + 0.5) ? 1 : "both" }') in
	0) worse "$cmp" "$v0" ;;
	1) worse "$cmp" "$v1" ;;
	*) worse "$cmp" "$v0" "$v1" ;;
	esac
}

# run_job NAME MODEL MODE METRIC CMP MARK PORT ARGS...
run_job() {
	local name=$1 model=$2 mode=$3 metric=$4 cmp=$5 mark=$6 port=$7; shift 7
	local map=$TB_DIR/.endpoint_map-$name cl t0 t1 i secs v ok vals=() n got
	printf '127.0.0.1:%d=198.19.0.1:6666\n127.0.0.1:%d=198.19.0.2:5555\n127.0.0.1:%d=198.19.0.3:5555\n' \
		"$port" $((port + 1)) $((port + 2)) >"$map"
	cl="--ps 127.0.0.1:$port --workers 127.0.0.1:$((port + 1)),127.0.0.1:$((port + 2))"
	cl="$cl --endpoint-map $map --protocol $PROTO --mode $mode --wait-timeout 30 --retry-interval 1"
	tb_log "$name: $model, $mode, $PROTO: $*"
	if [ "$PROTO" = dpdk ]; then
		tb_switch 3 || { tb_log "$name: the switch did not start"; return 1; }
	fi
	t0=$(date +%s.%N)
	tb_node ps-$name 0 train $cl --role ps --model "$model" --seed "$SEED" "$@"
	for i in 0 1; do
		tb_node w$i-$name $((i + 1)) train $cl --role worker --task-index $i --model "$model" \
			--seed "$SEED" "$@"
	done
	# Note when each worker exits: the one that exits last evaluated the finished model.
	local end=("" "")
	for _ in $(seq 1 $((JOB_TIMEOUT * 5))); do
		for i in 0 1; do
			[ -z "${end[$i]}" ] && ! kill -0 "${TB_PIDS[w$i-$name]}" 2>/dev/null &&
				end[$i]=$(date +%s.%N)
		done
		[ -n "${end[0]}" ] && [ -n "${end[1]}" ] && break
		sleep 0.2
	done
	t1=$(date +%s.%N)
	"$TB_BUILD/wharf-ctl" 127.0.0.1:$port shutdown >/dev/null 2>&1
	for n in w0-$name w1-$name ps-$name switch; do tb_stop "$n"; done
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
	for i in 0 1; do
		if grep -q "\"mode\":\"$mode\"" "$TB_DIR/w$i-$name.out" 2>/dev/null; then
			got=$(tb_json "$TB_DIR/w$i-$name.out" "$metric" missing)
			[ "$got" = missing ] && tb_log "$name: worker $i: no number \"$metric\" in its JSON line"
			vals+=("$got")
			tb_log "$name: worker $i: $(grep '^{' "$TB_DIR/w$i-$name.out" | tail -n 1)"
		else
			vals+=(missing)
			tb_log "$name: worker $i did not finish; its log and the PS's:"
			tail -n 6 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2
			TB_KEEP_LOGS=1
		fi
	done
	v=$(final_value "$cmp" "${end[0]}" "${end[1]}" "${vals[@]}")
	if [ "$v" != null ] && awk -v v="$v" -v m="$mark" -v c="$cmp" \
		'BEGIN { exit !(c == ">=" ? v >= m : v <= m) }'; then
		ok=true
	else
		ok=false
		ALL_OK=false
		TB_KEEP_LOGS=1
	fi
	ROWS+=("$(printf '%-8s %-6s %-14s %8s %8s %-6s %8s' "$model" "$mode" "$metric" "$v" "$cmp$mark" \
		"$ok" "$secs")")
	JSON+=("$(printf '{"model":"%s","mode":"%s","metric":"%s","value":%s,"cmp":"%s","mark":%s,"ok":%s,"seconds":%s}' \
		"$model" "$mode" "$metric" "$v" "$cmp" "$mark" "$ok" "$secs")")
	tb_log "$name: $metric $v (mark $cmp $mark): $ok, $secs s"
}

tb_init
T0=$(date +%s)
port=47900
[ "$PROTO" = kernel ] && port=47950
# fd 3, so that nothing a job runs in the foreground can read the job list
while read -r -u 3 name model mode metric cmp mark args; do
	[ -n "$name" ] || continue
	if selected "$name" "$model" "$mode"; then
		# shellcheck disable=SC2086 # args is a word list by design
		run_job "$name" "$model" "$mode" "$metric" "$cmp" "$mark" "$port" $args ${E2E_EXTRA_ARGS:-}
	fi
	port=$((port + 4))
done 3<<<"$JOBS"
TOTAL=$(( $(date +%s) - T0 ))

echo
echo "=== every model in every mode, protocol $PROTO, 1 PS + 2 workers (value: the last worker to finish)"
printf '%-8s %-6s %-14s %8s %8s %-6s %8s\n' model mode metric value mark ok seconds
printf '%s\n' "${ROWS[@]}"
echo "total $TOTAL s"
tb_cleanup
( IFS=,; printf '{"protocol":"%s","all_ok":%s,"seconds":%d,"jobs":[%s]}\n' \
	"$PROTO" "$ALL_OK" "$TOTAL" "${JSON[*]}" )
[ "$ALL_OK" = true ]
