#!/usr/bin/env bash
# The Python package (python/wharf) against real servers: the pytest tests of python/tests on
# a switch of 5 virtio-user ports (port 0: the tests' PS, 1: the pytest process as a worker,
# 2-4: the examples' PS and two workers) and on kernel TCP. Round trips of every call on
# both protocols, zero-copy, each bad input's exception, four threads on the exactly-once
# ledger, and a short PyTorch training run of each example.
# pytest's own summary line is in the log; this script counts as one test. Needs the
# package built (make python) and python3-pytest, -numpy, -torch (make deps).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

PY=${PYTHON:-/usr/bin/python3}
missing=$("$PY" -c 'import importlib.util as u
print(" ".join(m for m in ("pytest", "numpy", "torch") if u.find_spec(m) is None))' \
	2>/dev/null || echo python3)
if [ -n "$missing" ] || ! ls "$TB_BUILD"/python/wharf/_wharf.*.so >/dev/null 2>&1; then
	what="${missing:-the wharf package (make python)}"
	[ -n "${WHARF_TEST_DEPS:-}" ] && tb_fail "missing $what, which make deps / make all provide"
	tb_log "SKIP: python: missing $what"
	exit 77
fi

tb_init
tb_switch 5 || tb_fail "the switch did not start"
export WHARF_TEST_DIR=$TB_DIR
for i in 0 1 2 3 4; do export "WHARF_TEST_EAL_$i=$(tb_eal py$i "$i")"; done
export PYTHONPATH=$TB_BUILD/python
cd "$TB_ROOT"

# One pytest process for kernel TCP and the examples, then one per DPDK job: a process brings
# up DPDK's EAL once, on switch port 1, for the one client of its job. WHARF_PYTEST_RUNS
# (e.g. "dpdk-geo") picks runs: kernel, dpdk-sync, dpdk-async, dpdk-geo.
fails=0
run_pytest() { # NAME BASE-PORT -k EXPRESSION
	local name=$1 out=$TB_DIR/pytest-$1.out rc summary
	case " ${WHARF_PYTEST_RUNS:-$name} " in *" $name "*) ;; *) return 0 ;; esac
	# --capture=sys: what the library writes to stderr (fd 2) stays in the log
	WHARF_TEST_BASE_PORT=$2 timeout --kill-after=10 150 "$PY" -u -m pytest -p no:cacheprovider \
		--capture=sys -q -rs -k "$3" python/tests 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	summary=$(grep -E '^=* *[0-9]+ (passed|failed|error)' "$out" | tail -n 1 | tr -d '=')
	if [ $rc -gt 128 ] && [ $rc -lt 160 ] && [[ "$summary" == *passed* ]] &&
		[[ "$summary" != *failed* ]] && [[ "$summary" != *error* ]]; then
		# Every test passed and was torn down; the process died on its way out.
		why="then the process died by signal $((rc - 128)) at exit"
		tb_skip "python $name" "pytest:$summary; $why (libwharf's DPDK client teardown)"
	elif [ $rc -ne 0 ]; then
		tb_log "FAIL: pytest $name: exit $rc:$summary"
		fails=$((fails + 1))
	else
		case "$summary" in *skipped*) tb_skip "python $name" "pytest:$summary" ;; esac
		tb_pass "python $name:$summary"
	fi
}
run_pytest kernel 47900 "not dpdk-"
base=47940
for mode in sync async geo; do
	run_pytest "dpdk-$mode" $base "dpdk-$mode"
	base=$((base + 20))
done
[ $fails -eq 0 ] || tb_fail "$fails pytest run(s) failed"
