#!/usr/bin/env bash
# make test: the cmocka unit tests, the integration tests over the virtual testbed, the
# unit tests again under ASan+UBSan, and a short smoke of every fuzz harness. Every stage
# runs even when an earlier one failed; the last line adds up all of them:
#   make test: N passed, N failed
set -u
cd "$(dirname "$0")/.."
units=$1; shift
integs=("$@")
total_p=0; total_f=0; rc=0
stage() { # NAME CMD...
	local name=$1 log; shift
	log=build/test-logs/stage-$name.log
	mkdir -p build/test-logs
	echo "==== $name"
	"$@" 2>&1 | tee "$log"
	local st=${PIPESTATUS[0]} p f
	read -r p f < <(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | awk '{print $1, $3}')
	total_p=$((total_p + ${p:-0})); total_f=$((total_f + ${f:-0}))
	if [ "$st" -ne 0 ]; then
		rc=1
		[ "${f:-0}" -gt 0 ] || total_f=$((total_f + 1)) # a stage that died without a count
	fi
}
stage tests testbed/run_tests.sh all $units -- "${integs[@]}"
stage sanitizers make --no-print-directory unit-san
stage fuzz-smoke fuzz/run.sh --smoke
echo "make test: $total_p passed, $total_f failed"
exit $rc
