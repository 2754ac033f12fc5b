#!/usr/bin/env bash
# make test: the cmocka unit tests, the integration tests over the virtual testbed, the
# unit tests again under ASan+UBSan, and a short smoke of every fuzz harness. Every stage
# runs even when an earlier one failed; the last line adds up all of them:
#   test: N passed, N failed, N skipped
# A skip is a test that could not run a part and said why (testbed/run_tests.sh); a skip of
# something `make deps` installs is a failure (WHARF_TEST_DEPS=1, set by `make test`).
set -u
cd "$(dirname "$0")/.."
units=$1; shift
integs=("$@")
total_p=0; total_f=0; total_s=0; rc=0
stage() { # NAME CMD...
	local name=$1 log t0=$SECONDS; shift
	log=build/test-logs/stage-$name.log
	mkdir -p build/test-logs
	echo "==== $name"
	"$@" 2>&1 | tee "$log"
	local st=${PIPESTATUS[0]} p f s
	echo "==== $name: $((SECONDS - t0)) s"
	read -r p f s < <(sed -nE 's/^([0-9]+) passed, ([0-9]+) failed(, ([0-9]+) skipped)?$/\1 \2 \4/p' "$log" | tail -n 1)
	total_p=$((total_p + ${p:-0})); total_f=$((total_f + ${f:-0})); total_s=$((total_s + ${s:-0}))
	if [ -z "${p:-}" ]; then # a stage that died (or ended) without a count
		echo "$name: no \"N passed, N failed\" line: counted as 1 failed"
		rc=1; total_f=$((total_f + 1))
	elif [ "$st" -ne 0 ]; then
		rc=1
		[ "$f" -gt 0 ] || total_f=$((total_f + 1)) # failed, yet counted no failure
	fi
}
stage tests testbed/run_tests.sh all $units -- "${integs[@]}"
stage sanitizers make --no-print-directory unit-san
stage fuzz-smoke fuzz/run.sh --smoke
echo "test: $total_p passed, $total_f failed, $total_s skipped"
exit $rc
