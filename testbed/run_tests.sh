#!/usr/bin/env bash
# Runs wharf's tests and prints one summary line last.
#   run_tests.sh unit  BIN...              cmocka binaries
#   run_tests.sh integ SCRIPT...           integration scripts (testbed/tests/t_*.sh)
#   run_tests.sh all   BIN... -- SCRIPT... both
# Every test is bounded in time (UNIT_TIMEOUT, INTEG_TIMEOUT seconds). Each counts once, as
# passed, failed or skipped: a cmocka binary that skipped a test case (cmocka's "[  SKIPPED ]")
# and an integration script that exits 77 (a part it could not run, named on a "SKIP:" line)
# are skipped, never passed. The last line is "N passed, N failed, N skipped"; exit status is
# non-zero when anything failed. Set WHARF_TEST_FILTER to a substring to run a subset.
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

run_one() { # kind path timeout
	local kind=$1 t=$2 to=$3 name log rc t0=$SECONDS
	name=$(basename "$t")
	[ -n "$filter" ] && [[ "$t" != *"$filter"* ]] && return
	log="$logdir/$name.log"
	printf '== %s %s\n' "$kind" "$t"
	timeout --kill-after=10 "$to" "$t" >"$log" 2>&1
	rc=$?
	times+=("$((SECONDS - t0)) $name")
	# cmocka's own summary lines (and the test names) go to the console.
	grep -E '^\[ *(RUN|OK|PASSED|FAILED|SKIPPED|  ERROR) *\]|^\[==========\]|^ok |^not ok |^(PASS|FAIL)|SKIP: ' "$log" | tail -n 60
	if skipped_in "$kind" "$rc" "$log"; then
		skipped=$((skipped + 1))
		skips+=("$t: $(skip_reasons "$log")")
	elif [ $rc -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1)); failures+=("$t (rc=$rc, log $log)")
		echo "---- last lines of $log"; tail -n 30 "$log"
	fi
}

for t in "${units[@]}"; do run_one unit "$t" "${UNIT_TIMEOUT:-120}"; done
for t in "${integs[@]}"; do run_one integ "$t" "${INTEG_TIMEOUT:-240}"; done

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
