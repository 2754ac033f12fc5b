#!/usr/bin/env bash
# A worker stopped with SIGTERM or SIGINT in the middle of training, its PS answering: it
# stops at its next step, push or round boundary within STOP_MAX_MS (2 s), exits 0, logs
# "worker N stopped on SIGTERM ...", and its last JSON line says "stopped"; what it pushed is
# on the PS exactly once, read from outside (wharf-ctl save, testbed/soak/ckpt_ledger.py):
#   1. count, async, dpdk over the switch: worker 1 stopped with SIGTERM; its key on the PS
#      equals its acknowledged pushes and its highest applied sequence (none lost, none
#      half-sent); started again under its id, it goes on from there and a shutdown command
#      on its control endpoint stops it the same way; worker 0 runs on to its exact ledger.
#   2. count, sync, kernel TCP: worker 1 stopped with SIGTERM, then worker 0, waiting at the
#      barrier for it, with SIGINT; the shared key is the sum of the workers' keys, equal to
#      each other, each between the steps its worker finished and the steps it pushed.
#   3. count, GEO (the GEO ledger), kernel TCP, a wharf-train --role ps: the worker's counter
#      row on the PS equals, bit for bit, the sum of the deltas it pushed, its last sequence
#      its pushes, each of its finished rounds' fresh rows 1 (none lost, none doubled).
#   4. softmax in GEO (--geo-k 100: the steps since the last sync pushed at the stop) and lr
#      async (SIGINT), kernel TCP: stopped mid-epoch.
#   5. a worker waiting for its servers (--wait-timeout 30): one whose PS never came up, and
#      one whose PS was SIGKILLed mid-training; each stops on SIGTERM within STOP_MAX_MS,
#      exit 0, not at the end of its wait.
# Every PS is stopped with SIGTERM at the end of its part: exit 0 within STOP_MAX_MS, its
# checkpoint written. (The soak's worker SIGTERM checks the same exit on an impaired switch.)
set -u
. "$(dirname "$0")/../cluster/tb.sh"

# A stop waits for the request in flight: about 30 ms here, more when builds share the cores.
STOP_MAX_MS=${STOP_MAX_MS:-2000}
SOAK=$(cd "$(dirname "$0")/../soak" && pwd)
B=48940
tb_init

# SIG the process NAME, wait for it (5 s, then SIGKILL and fail); ms into STOP_MS. Fails
# unless it exited 0 within STOP_MAX_MS.
stop_timed() { # NAME SIG
	local n=$1 sig=$2 pid=${TB_PIDS[$1]} t0 rc
	kill -0 "$pid" 2>/dev/null || { tail -n 5 "$TB_DIR/$n.log" >&2; tb_fail "$n had exited before its SIG$sig"; }
	t0=$(date +%s%N)
	kill -"$sig" "$pid"
	for _ in $(seq 1 250); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
	STOP_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid"; wait "$pid" 2>/dev/null; unset "TB_PIDS[$n]"
		tail -n 5 "$TB_DIR/$n.log" >&2
		tb_fail "$n still ran $STOP_MS ms after its SIG$sig (killed with SIGKILL)"
	fi
	wait "$pid"; rc=$?; unset "TB_PIDS[$n]"
	[ $rc -eq 0 ] || { tail -n 5 "$TB_DIR/$n.log" >&2; tb_fail "$n exited with status $rc on SIG$sig, not 0"; }
	[ "$STOP_MS" -le "$STOP_MAX_MS" ] || tb_fail "$n took $STOP_MS ms to stop on SIG$sig (more than $STOP_MAX_MS)"
}

# A worker's graceful stop: stop_timed, its log line and its JSON line.
stop_worker() { # NAME SIG
	stop_timed "$1" "$2"
	grep -q "worker [0-9]* stopped on SIG$2 " "$TB_DIR/$1.log" ||
		{ tail -n 5 "$TB_DIR/$1.log" >&2; tb_fail "$1 did not log that it stopped on SIG$2"; }
	grep '^{' "$TB_DIR/$1.out" | tail -n 1 | grep -q "\"stopped\":\"SIG$2\"" ||
		{ tail -n 3 "$TB_DIR/$1.out" >&2; tb_fail "$1's JSON line does not say it stopped on SIG$2"; }
	tb_log "$1: $(grep -o 'stopped on SIG.*' "$TB_DIR/$1.log") ($STOP_MS ms after SIG$2)"
}

# start_ps NAME BIN MODEL: a PS of $CL (BIN wharf-psd or wharf-train) checkpointing to NAME.ckpt,
# serving before this returns.
start_ps() {
	"$TB_BUILD/$2" -- $CL --role ps --model "$3" --ckpt "$TB_DIR/$1.ckpt" >"$TB_DIR/$1.out" \
		2>"$TB_DIR/$1.log" &
	TB_PIDS[$1]=$!
	tb_wait_log "$TB_DIR/$1.log" "serving" 20 || { cat "$TB_DIR/$1.log" >&2; tb_fail "$1 did not start"; }
}

# start_count NAME TASK-INDEX [ARGS...]: a count worker of $CL (a million pushes) in the background.
start_count() {
	local n=$1 i=$2; shift 2
	"$TB_BUILD/wharf-train" -- $CL --role worker --task-index "$i" --model count \
		--count-pushes 1000000 "$@" >"$TB_DIR/$n.out" 2>"$TB_DIR/$n.log" &
	TB_PIDS[$n]=$!
}

stop_ps() { # NAME CKPT
	stop_timed "$1" TERM
	grep -q "checkpoint $2" "$TB_DIR/$1.log" || { tail -n 5 "$TB_DIR/$1.log" >&2; tb_fail "$1 wrote no checkpoint at SIGTERM"; }
	tb_log "$1: stopped on SIGTERM in $STOP_MS ms, exit 0, checkpoint written"
}

snapshot() { # CTL-PORT TAG: the PS's state now, as ckpt_ledger.py --rows prints it
	"$TB_BUILD/wharf-ctl" --timeout-ms 10000 "127.0.0.1:$1" save "$TB_DIR/$2" >/dev/null ||
		tb_fail "the PS did not save ($2)"
	python3 "$SOAK/ckpt_ledger.py" --rows "$TB_DIR/$2"
}

running_for() { # NAME SECS: the worker connected and ran SECS more
	tb_wait_log "$TB_DIR/$1.log" "connected to" 30 || { cat "$TB_DIR/$1.log" >&2; tb_fail "$1 did not connect"; }
	sleep "$2"
	kill -0 "${TB_PIDS[$1]}" 2>/dev/null || { tail -n 5 "$TB_DIR/$1.log" >&2; tb_fail "$1 finished before its signal"; }
}

# ---- 1. count, async, dpdk over the switch
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:%d=198.19.9.1:6666\n127.0.0.1:%d=198.19.9.2:5555\n127.0.0.1:%d=198.19.9.3:5555\n' \
	$B $((B + 1)) $((B + 2)) >"$MAP"
CL="--ps 127.0.0.1:$B --workers 127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2)) --endpoint-map $MAP"
CL="$CL --protocol dpdk --mode async --retry-interval 1 --wait-timeout 30"
tb_switch 3 || tb_fail "switch"
tb_node ps1 0 psd $CL --role ps --model count --ckpt "$TB_DIR/ps1.ckpt"
tb_wait_log "$TB_DIR/ps1.log" "serving" 30 || { cat "$TB_DIR/ps1.log" >&2; tb_fail "ps1 did not start"; }
tb_node a0 1 train $CL --role worker --task-index 0 --model count --count-pushes 2000 --count-delay-us 1000
tb_node a1 2 train $CL --role worker --task-index 1 --model count --count-pushes 1000000 --count-delay-us 1000
running_for a1 1.5
stop_worker a1 TERM
acked=$(tb_json "$TB_DIR/a1.out" acked)
led=$(snapshot $B a.snap)
grep -q '"gave_up":false' "$TB_DIR/a1.out" || tb_fail "async: the SIGTERM gave up a request in flight"
python3 - "$acked" "$led" <<'EOF' || tb_fail "async: the stopped worker's ledger on the PS"
import json, sys
acked, w = int(sys.argv[1]), json.loads(sys.argv[2])["workers"].get("1", {"value": 0, "last_seq": 0})
print(f"[async] worker 1: {acked} pushes acknowledged, PS holds {w['value']}, highest applied "
      f"sequence {w['last_seq']}", file=sys.stderr)
sys.exit(0 if acked > 0 and w["value"] == acked and w["last_seq"] == acked else 1)
EOF
# Worker 1 again under its id (it goes on after its last sequence), stopped by a shutdown
# command on its control endpoint the same way.
tb_node a1b 2 train $CL --role worker --task-index 1 --model count --count-pushes 1000000 --count-delay-us 1000
running_for a1b 1
t0=$(date +%s%N)
"$TB_BUILD/wharf-ctl" "127.0.0.1:$((B + 2))" shutdown >/dev/null || tb_fail "worker 1 refused the shutdown command"
for _ in $(seq 1 250); do kill -0 "${TB_PIDS[a1b]}" 2>/dev/null || break; sleep 0.02; done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
wait "${TB_PIDS[a1b]}"; rc=$?; unset "TB_PIDS[a1b]"
[ $rc -eq 0 ] && [ $ms -le "$STOP_MAX_MS" ] && grep -q '"stopped":"shutdown"' "$TB_DIR/a1b.out" ||
	{ tail -n 3 "$TB_DIR/a1b.log" "$TB_DIR/a1b.out" >&2; tb_fail "worker 1 on a shutdown command: exit $rc after $ms ms"; }
acked2=$(tb_json "$TB_DIR/a1b.out" acked); start2=$(tb_json "$TB_DIR/a1b.out" start)
gave_up=0; grep -q '"gave_up":true' "$TB_DIR/a1b.out" && gave_up=1
led=$(snapshot $B a.snap2)
# The command is served while a push waits for its answer, and ends that wait: the push
# given up was numbered, so the PS applied it once or not at all.
python3 - "$acked" "$start2" "$acked2" "$gave_up" "$led" <<'EOF' || tb_fail "async: worker 1's ledger after its second process"
import json, sys
a, start, a2, gave_up = (int(x) for x in sys.argv[1:5])
w = json.loads(sys.argv[5])["workers"]["1"]
print(f"[async] worker 1 again: started at {start}, {a2} more acknowledged"
      f"{', a push in flight given up' if gave_up else ''}; PS holds {w['value']}, highest "
      f"applied sequence {w['last_seq']}", file=sys.stderr)
sys.exit(0 if start == a and w["value"] == w["last_seq"] and
         a + a2 <= w["value"] <= a + a2 + gave_up else 1)
EOF
tb_log "a1b: stopped by a shutdown command in $ms ms, exit 0"
for _ in $(seq 1 30); do kill -0 "${TB_PIDS[a0]}" 2>/dev/null || break; sleep 1; done
grep -q '"exactly_once":true' "$TB_DIR/a0.out" || { tail -n 5 "$TB_DIR/a0.log" "$TB_DIR/a0.out" >&2; tb_fail "async: worker 0's ledger after worker 1 stopped"; }
stop_ps ps1 "$TB_DIR/ps1.ckpt"
tb_stop switch
tb_pass "async, dpdk: worker 1 stopped on SIGTERM with $acked pushes acknowledged, all $acked applied once (value = highest sequence = $acked); again under its id, stopped by a shutdown command, $acked2 more, exact; worker 0 exact"

# ---- 2. count, sync, kernel TCP: one worker stopped, then the other waiting at its barrier
P=$((B + 5))
CL="--ps 127.0.0.1:$P --num-workers 2 --protocol kernel --mode sync --retry-interval 1 --wait-timeout 20"
start_ps ps2 wharf-psd count
for i in 0 1; do start_count "s$i" "$i" --count-delay-us 1000; done
running_for s1 1.5
stop_worker s1 TERM
sleep 0.3 # worker 0 waits at the barrier of a step worker 1 never reaches
stop_worker s0 INT
led=$(snapshot $P s.snap)
python3 - "$(grep '^{' "$TB_DIR/s0.out" | tail -n 1)" "$(grep '^{' "$TB_DIR/s1.out" | tail -n 1)" "$led" <<'EOF' ||
import json, sys
w = [json.loads(sys.argv[1]), json.loads(sys.argv[2])]
rows = json.loads(sys.argv[3])["row_values"]
v = [rows.get("1000", 0.0), rows.get("1001", 0.0)]
shared = rows.get("999", 0.0)
ok = shared == v[0] + v[1] and v[0] == v[1]
for i in (0, 1):
    print(f"[sync] worker {i}: {w[i]['steps']} steps done, {w[i]['pushed']} pushed; its key on "
          f"the PS {v[i]:.0f}", file=sys.stderr)
    ok &= w[i]["steps"] > 0 and w[i]["steps"] <= v[i] <= w[i]["pushed"]
print(f"[sync] shared key {shared:.0f} (the workers' keys sum to {v[0] + v[1]:.0f})", file=sys.stderr)
sys.exit(0 if ok else 1)
EOF
	tb_fail "sync: the stopped workers' steps on the PS"
stop_ps ps2 "$TB_DIR/ps2.ckpt"
tb_pass "sync, kernel: worker 1 stopped on SIGTERM, worker 0 on SIGINT while at the barrier; every step applied once for both"

# ---- 3. the GEO ledger, kernel TCP, served by wharf-train --role ps
P=$((B + 6))
CL="--ps 127.0.0.1:$P --num-workers 1 --protocol kernel --mode geo --retry-interval 1 --wait-timeout 20"
start_ps ps3 wharf-train count
start_count g0 0 --count-delay-us 1000
running_for g0 1.5
stop_worker g0 TERM
led=$(snapshot $P g.snap)
python3 - "$(grep '^{' "$TB_DIR/g0.out" | tail -n 1)" "$led" <<'EOF' || tb_fail "GEO: the stopped worker's ledger on the PS"
import json, struct, sys
w, led = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rows, seq = led["row_values"], led["workers"].get("0", {"last_seq": 0})["last_seq"]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
counter, want = rows.get("1000", 0.0), f32(w["counter_expected"])
done, e_base = w["rounds_done"], 1 << 40
ones = sum(1 for i in range(done) if rows.get(str(e_base | i)) == 1.0)
other = sum(1 for k, x in rows.items() if int(k) >= e_base and x != 1.0)
beyond = sum(1 for k in rows if int(k) >= e_base + done)
print(f"[geo] worker 0: {done} rounds, {w['pushes']} pushes; PS: counter {counter!r} (pushed "
      f"deltas sum to {want!r}), highest sequence {seq}, fresh rows at 1: {ones} of {done}, "
      f"other values {other}, rows past its rounds {beyond}", file=sys.stderr)
sys.exit(0 if done > 0 and not w["gave_up"] and counter == want and seq == w["pushes"] and
         ones == done and other == 0 and beyond == 0 else 1)
EOF
stop_ps ps3 "$TB_DIR/ps3.ckpt"
tb_pass "GEO, kernel: the worker stopped on SIGTERM after $(tb_json "$TB_DIR/g0.out" rounds_done) rounds, its counter on the PS exact to the bit"

# ---- 4. the models: softmax in GEO, lr async
P=$((B + 7))
CL="--ps 127.0.0.1:$P --num-workers 1 --protocol kernel --mode geo --geo-k 100 --retry-interval 1 --wait-timeout 20"
start_ps ps4 wharf-psd softmax
"$TB_BUILD/wharf-train" -- $CL --role worker --task-index 0 --model softmax --epochs 50 \
	--train-limit 12000 --test-limit 1000 >"$TB_DIR/m0.out" 2>"$TB_DIR/m0.log" &
TB_PIDS[m0]=$!
tb_wait_log "$TB_DIR/m0.out" "^epoch" 30 || { cat "$TB_DIR/m0.log" >&2; tb_fail "softmax: no progress line"; }
running_for m0 0.3
stop_worker m0 TERM
steps=$(tb_json "$TB_DIR/m0.out" steps)
[ "$steps" -gt 0 ] || tb_fail "softmax: stopped before its first step"
# Its local steps since the last GEO sync (every 100 steps) went out at the stop.
want=true; [ $((steps % 100)) -eq 0 ] && want=false
grep '^{' "$TB_DIR/m0.out" | tail -n 1 | grep -q "\"geo_synced\":$want" ||
	{ tail -n 1 "$TB_DIR/m0.out" >&2; tb_fail "softmax GEO: geo_synced is not $want after $steps steps"; }
stop_ps ps4 "$TB_DIR/ps4.ckpt"
P=$((B + 8))
CL="--ps 127.0.0.1:$P --num-workers 1 --protocol kernel --mode async --retry-interval 1 --wait-timeout 20"
start_ps ps5 wharf-psd lr
"$TB_BUILD/wharf-train" -- $CL --role worker --task-index 0 --model lr --epochs 100 \
	--ctr-samples 50000 >"$TB_DIR/c0.out" 2>"$TB_DIR/c0.log" &
TB_PIDS[c0]=$!
tb_wait_log "$TB_DIR/c0.out" "^epoch" 30 || { cat "$TB_DIR/c0.log" >&2; tb_fail "lr: no progress line"; }
running_for c0 0.3
stop_worker c0 INT
stop_ps ps5 "$TB_DIR/ps5.ckpt"
tb_pass "softmax (GEO, $(tb_json "$TB_DIR/m0.out" steps) steps) and lr (async, $(tb_json "$TB_DIR/c0.out" steps) steps): stopped mid-training, exit 0"

# ---- 5. workers waiting for their servers: at the start, and after losing the PS
P=$((B + 9))
CL="--ps 127.0.0.1:$P --num-workers 1 --protocol kernel --mode async --retry-interval 1 --wait-timeout 30"
start_count n0 0
tb_wait_log "$TB_DIR/n0.log" "server not ready" 20 || { cat "$TB_DIR/n0.log" >&2; tb_fail "n0 did not wait for its server"; }
stop_timed n0 TERM
grep -q "worker 0 stopped on SIGTERM while waiting for its servers" "$TB_DIR/n0.log" ||
	{ tail -n 3 "$TB_DIR/n0.log" >&2; tb_fail "n0 did not log that it stopped while waiting"; }
n0_ms=$STOP_MS
P=$((B + 10))
CL="--ps 127.0.0.1:$P --num-workers 1 --protocol kernel --mode async --retry-interval 1 --wait-timeout 30"
start_ps ps6 wharf-psd count
start_count r0 0 --count-delay-us 1000
running_for r0 0.5
kill -KILL "${TB_PIDS[ps6]}"; wait "${TB_PIDS[ps6]}" 2>/dev/null; unset "TB_PIDS[ps6]"
tb_wait_log "$TB_DIR/r0.log" "server not ready" 20 || { cat "$TB_DIR/r0.log" >&2; tb_fail "r0 did not wait for its lost server"; }
stop_worker r0 TERM
tb_pass "waiting for servers: stopped on SIGTERM $n0_ms ms (never connected) and $STOP_MS ms (its PS killed) after the signal, exit 0"
