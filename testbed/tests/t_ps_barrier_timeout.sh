#!/usr/bin/env bash
# A dead worker does not hang sync training: two workers train the "count" model in sync mode,
# worker 1 is killed with SIGKILL and not started again.
#   1. --barrier-timeout 2 --barrier-policy fail (dpdk): within the timeout and a little more,
#      worker 0 fails naming worker 1 as missing; the PS log says the same, and its telemetry
#      (/wharf/ps/server) shows the timeout and the missing worker.
#   2. WHARF_BARRIER_TIMEOUT_S=1 WHARF_BARRIER_POLICY=continue (kernel TCP): the step is applied
#      without worker 1 and worker 0 trains to its last step, its ledger exact (its key counts
#      every step, the shared key is the sum of the workers' keys, worker 1's stopped).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48710
tb_train_map $B 198.19.8
MAP=$TB_TRAIN_MAP
WL="127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2))"

wait_gone() { # NAME SECS
	for _ in $(seq 1 $(($2 * 10))); do kill -0 "${TB_PIDS[$1]}" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}

# ---- 1. policy fail
CL="--ps 127.0.0.1:$B --workers $WL --endpoint-map $MAP --protocol dpdk --mode sync"
CL="$CL --retry-interval 1 --wait-timeout 30"
tb_switch 3 || tb_fail "switch"
tb_node ps 0 psd $CL --role ps --model count --barrier-timeout 2 --barrier-policy fail
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "ps did not start"; }
grep -q "barrier timeout 2 s (fail)" "$TB_DIR/ps.log" || tb_fail "the PS does not say its barrier timeout"
W="--role worker --model count --count-pushes 100000 --count-delay-us 5000"
tb_node w0 1 train $CL $W --task-index 0
tb_node w1 2 train $CL $W --task-index 1
tb_wait_log "$TB_DIR/w1.log" "connected to 1 server" 20 || { cat "$TB_DIR/w1.log" >&2; tb_fail "worker 1 did not start"; }
sleep 1
kill -KILL "${TB_PIDS[w1]}"; wait "${TB_PIDS[w1]}" 2>/dev/null; unset "TB_PIDS[w1]"
t0=$(date +%s.%N)
wait_gone w0 15 || tb_fail "worker 0 still waits 15 s after worker 1 died (barrier timeout 2 s)"
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" "BEGIN { print b - a }")
wait "${TB_PIDS[w0]}"; rc=$?; unset "TB_PIDS[w0]"
[ $rc -ne 0 ] || tb_fail "worker 0 ended well without worker 1"
grep -q "waited 2000 ms at the barrier of server 0 for worker 1 (1 of 2 missing)" "$TB_DIR/w0.log" ||
	{ tail -n 5 "$TB_DIR/w0.log" >&2; tb_fail "worker 0's failure does not name worker 1"; }
grep -q "WARNING wharf.ps: sync step [0-9]* waited 2000 ms .* for worker 1 (1 of 2 missing); barrier policy fail" "$TB_DIR/ps.log" ||
	{ tail -n 5 "$TB_DIR/ps.log" >&2; tb_fail "the PS log does not name the missing worker"; }
srv=$(printf '/wharf/ps/server\n' | timeout 15 dpdk-telemetry.py -f "wharf-$TB_ID-ps" 2>&1)
echo "$srv" | grep -q '"barrier_timeouts": [1-9]' && echo "$srv" | grep -q '"barrier_late": "1"' ||
	{ echo "$srv" >&2; tb_fail "/wharf/ps/server does not show the timeout and the missing worker"; }
tb_pass "policy fail: worker 0 failed $(printf %.1f "$t") s after worker 1 died: $(grep -m1 -o 'sync step [0-9]* waited[^;]*' "$TB_DIR/w0.log"); telemetry $(echo "$srv" | grep -o '"barrier_timeouts": [0-9]*'), $(echo "$srv" | grep -o '"barrier_late": "[0-9,]*"')"
tb_stop ps
tb_stop switch

# ---- 2. policy continue, from the environment
STEPS=400
CL="--ps 127.0.0.1:$B --workers $WL --protocol kernel --mode sync --retry-interval 1 --wait-timeout 20"
export WHARF_BARRIER_TIMEOUT_S=1 WHARF_BARRIER_POLICY=continue
"$TB_BUILD/wharf-psd" -- $CL --role ps --task-index 0 --model count >"$TB_DIR/ps2.out" 2>"$TB_DIR/ps2.log" &
TB_PIDS[ps2]=$!
tb_wait_log "$TB_DIR/ps2.log" "serving" 20 || { cat "$TB_DIR/ps2.log" >&2; tb_fail "ps did not start"; }
grep -q "barrier timeout 1 s (continue)" "$TB_DIR/ps2.log" || tb_fail "WHARF_BARRIER_* not taken"
for i in 0 1; do
	"$TB_BUILD/wharf-train" -- $CL --role worker --task-index $i --model count --count-pushes $STEPS \
		--count-delay-us 5000 >"$TB_DIR/c$i.out" 2>"$TB_DIR/c$i.log" &
	TB_PIDS[c$i]=$!
done
sleep 1
kill -KILL "${TB_PIDS[c1]}"; wait "${TB_PIDS[c1]}" 2>/dev/null; unset "TB_PIDS[c1]"
wait_gone c0 30 || tb_fail "worker 0 still runs 30 s after worker 1 died (policy continue)"
grep -q '"exactly_once":true' "$TB_DIR/c0.out" && [ "$(tb_json "$TB_DIR/c0.out" left_out)" -eq 1 ] &&
	[ "$(tb_json "$TB_DIR/c0.out" value)" -eq $STEPS ] ||
	{ tail -n 5 "$TB_DIR/c0.log" "$TB_DIR/c0.out" >&2; tb_fail "worker 0 did not train on without worker 1"; }
grep -q "for worker 1 (1 of 2 missing); barrier policy continue" "$TB_DIR/ps2.log" ||
	{ tail -n 5 "$TB_DIR/ps2.log" >&2; tb_fail "the PS log does not name the worker it went on without"; }
tb_pass "policy continue: worker 0 trained all $STEPS steps without worker 1 (shared $(tb_json "$TB_DIR/c0.out" shared) = its $STEPS + worker 1's $(( $(tb_json "$TB_DIR/c0.out" shared) - STEPS )) before it died)"
tb_stop ps2
