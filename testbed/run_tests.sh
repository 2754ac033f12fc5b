#!/usr/bin/env bash
# Runs wharf's tests and prints one summary line last.
#   run_tests.sh unit  BIN...              cmocka binaries
#   run_tests.sh integ SCRIPT...           integration scripts (testbed/tests/t_*.sh)
#   run_tests.sh all   BIN... -- SCRIPT... both
# Every test is bounded in time (UNIT_TIMEOUT, INTEG_TIMEOUT seconds). Each counts once, as
# passed, failed or skipped: a cmocka binary that skipped a test case (cmocka's "[  SKIPPED ]")
# and an integration script that exits 77 (a part it could not run, named on a "SKIP:" line)
# are skipped, never passed. The last line is "N passed, N failed, N skipped"; exit status is
# non-zero when anything failed. Set WHARF_TEST_FILTER to a substring to run a subset, and
# WHARF_TEST_JOBS to the number of tests run at a time (see below).
set -u
mode=$1; shift
units=(); integs=()
case "$mode" in
unit) units=("$@") ;;
integ) integs=("$@") ;;
all)
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do units+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	integs=("$@") ;;
*) echo "usage: $0 unit|integ|all ..." >&2; exit 2 ;;
esac

passed=0; failed=0; skipped=0; failures=(); skips=(); times=()
filter=${WHARF_TEST_FILTER:-}
logdir=build/test-logs; mkdir -p "$logdir"

# Whether a test that ended with RC skipped something: unit, cmocka listed a skipped case
# (its exit status counts failures only); integ, the script exited 77.
skipped_in() { # kind rc log
	case $1 in
	unit) [ "$2" -eq 0 ] && grep -qE '^\[  SKIPPED \] [0-9]+ test\(s\)' "$3" ;;
	integ) [ "$2" -eq 77 ] ;;
	esac
}

# What was skipped and why: the "SKIP:" lines, else the names of cmocka's skipped cases.
skip_reasons() { # log
	local r
	r=$(grep -hoE 'SKIP: .*' "$1" | sed 's/^SKIP: //' | sort -u | paste -sd';')
	[ -n "$r" ] || r=$(sed -nE 's/^\[  SKIPPED \] (test_[A-Za-z0-9_]+)$/\1/p' "$1" | sort -u | paste -sd' ')
	echo "${r:-no reason given}" | cut -c1-300
}

# What one test's run printed: its cmocka summary lines (and test names), PASS/FAIL/SKIP lines,
# and on failure the last lines of its log. One printf, so that two slots' blocks do not mix.
report() { # kind path rc secs log
	local out
	out=$(printf '== %s %s (%s s)\n' "$1" "$2" "$4"
		grep -E '^\[ *(RUN|OK|PASSED|FAILED|SKIPPED|  ERROR) *\]|^\[==========\]|^ok |^not ok |^(PASS|FAIL)|SKIP: ' "$5" | tail -n 60
		if [ "$3" -ne 0 ] && ! skipped_in "$1" "$3" "$5"; then
			echo "---- last lines of $5"; tail -n 30 "$5"
		fi)
	printf '%s\n' "$out"
}

# Runs one test (in network namespace NS when given) and leaves "rc secs" in $resdir/NAME.
exec_one() { # ns kind path timeout
	local ns=$1 kind=$2 t=$3 to=$4 name log rc t0=$SECONDS
	name=$(basename "$t")
	log="$logdir/$name.log"
	if [ -n "$ns" ]; then
		WHARF_RUNTIME_DIR=$resdir/run-$ns timeout --kill-after=10 "$to" \
			ip netns exec "$ns" "$t" >"$log" 2>&1
	else
		timeout --kill-after=10 "$to" "$t" >"$log" 2>&1
	fi
	rc=$?
	echo "$rc $((SECONDS - t0))" >"$resdir/$name"
	report "$kind" "$t" "$rc" "$((SECONDS - t0))" "$log"
}

# A slot takes the queue's next test until none is left (a counter under flock).
next() {
	local n
	exec 8>>"$resdir/queue.lock"
	flock 8
	n=$(cat "$resdir/queue.next")
	echo $((n + 1)) >"$resdir/queue.next"
	exec 8>&-
	[ "$n" -lt ${#queue[@]} ] && echo "${queue[$n]}"
}
slot() { # ns
	local ns=$1 e
	while e=$(next); do
		set -- $e # kind timeout path
		exec_one "$ns" "$1" "$3" "$2"
	done
}

# Counts one test's result, in the order the tests were given.
tally() { # kind path
	local kind=$1 t=$2 name log rc secs
	name=$(basename "$t")
	log="$logdir/$name.log"
	read -r rc secs <"$resdir/$name" 2>/dev/null || { rc=1 secs=0; }
	times+=("$secs $name")
	if skipped_in "$kind" "$rc" "$log"; then
		skipped=$((skipped + 1))
		skips+=("$t: $(skip_reasons "$log")")
	elif [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1)); failures+=("$t (rc=$rc, log $log)")
	fi
}

# Tests run WHARF_TEST_JOBS at a time (default: 2 where there are 2 cores or more), each slot
# in a network namespace of its own (its own loopback, so the tests' fixed ports do not meet)
# with its own WHARF_RUNTIME_DIR: the tests spend most of their time waiting (timeouts,
# start-ups, sleeping nodes), not computing. A test whose file has the line "# test: alone"
# runs with nothing beside it, outside the slots' namespaces. Without the rights to make a
# namespace (not root), everything runs one at a time.
resdir=$(mktemp -d /tmp/wharf-tests.XXXX)
cores=$(nproc 2>/dev/null || echo 1)
jobs=${WHARF_TEST_JOBS:-$((cores >= 2 ? 2 : 1))}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "WHARF_TEST_JOBS=$jobs: expected a number of tests at a time, 1 or more" >&2; exit 2; }
# Hugepages for two tests at once (one takes up to about 250 2 MB pages): where the machine
# gave fewer, one at a time (a test that finds none free runs --no-huge by itself).
if [ "$jobs" -gt 1 ] && [ ${#integs[@]} -gt 0 ] && [ "$(testbed/hugepages.sh)" = huge ]; then
	free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
	if [ "${free:-0}" -lt $((300 * jobs)) ]; then
		echo "run_tests: $free free hugepages, under the $((300 * jobs)) of $jobs tests at a time: one at a time"
		jobs=1
	fi
fi
# The fixed ports of the integration tests (tb_reserve_ports, testbed/cluster/tb.sh) are out
# of the ephemeral range before any test runs, here and in each slot's namespace (a new
# namespace starts with none reserved): a connection bound to one of them by a unit test (a
# kernel client aiming at a lane picks its source port itself) left it in TIME_WAIT for 60 s,
# and an integration test that listened there soon after was refused ("cannot listen:
# Address already in use": seen on 47602 and 47780).
reserve_ports() { # [NETNS]
	${1:+ip netns exec "$1"} bash -c '. testbed/cluster/tb.sh && tb_reserve_ports' 2>/dev/null || true
}
reserve_ports
slots=()
cleanup() {
	local ns
	for ns in "${slots[@]}"; do ip netns del "$ns" 2>/dev/null; done
	rm -rf "$resdir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ "$jobs" -gt 1 ]; then
	for i in $(seq 1 "$jobs"); do
		ns=wharf-t$$-$i
		ip netns add "$ns" 2>/dev/null && slots+=("$ns") && ip -n "$ns" link set lo up 2>/dev/null &&
			reserve_ports "$ns" && continue
		echo "run_tests: cannot make network namespace $ns (not root?): tests run one at a time"
		for ns in "${slots[@]}"; do ip netns del "$ns" 2>/dev/null; done
		slots=()
		break
	done
fi
queue=(); alone=(); order=()
for t in "${units[@]}"; do order+=("unit $t"); done
for t in "${integs[@]}"; do order+=("integ $t"); done
for e in "${order[@]}"; do
	t=${e#* }
	[ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
	to=${UNIT_TIMEOUT:-120}; [ "${e%% *}" = integ ] && to=${INTEG_TIMEOUT:-240}
	if [ ${#slots[@]} -gt 0 ] && ! grep -qx '# test: alone' "$t" 2>/dev/null; then
		queue+=("${e%% *} $to $t")
	else
		alone+=("${e%% *} $to $t")
	fi
done
for e in "${alone[@]}"; do
	set -- $e
	exec_one "" "$1" "$3" "$2"
done
echo 0 >"$resdir/queue.next"
pids=()
for ns in "${slots[@]}"; do
	slot "$ns" &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for e in "${order[@]}"; do
	t=${e#* }
	[ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && continue
	tally "${e%% *}" "$t"
done

# The slowest, to keep the whole run within CI's budget (make test: under 15 minutes on 2 cores).
if [ ${#times[@]} -gt 0 ]; then
	echo "took $SECONDS s; slowest (s):"; printf '%s\n' "${times[@]}" | sort -rn | head -n 8 | sed 's/^/  /'
fi
if [ ${#failures[@]} -gt 0 ]; then
	echo "failed:"; printf '  %s\n' "${failures[@]}"
fi
if [ ${#skips[@]} -gt 0 ]; then
	echo "skipped:"; printf '  %s\n' "${skips[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ $failed -eq 0 ]
