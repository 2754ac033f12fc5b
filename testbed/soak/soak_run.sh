#!/usr/bin/env bash
# soak_run.sh — the fault soak driver, run by testbed/tests/t_soak_short.sh (short, in make
# test) and testbed/soak.sh (long). A cluster of SOAK_PS servers and 2 running "count" workers
# (apps/train: each push adds exactly 1 to the worker's own key, one push in flight, sequences
# 1, 2, 3, ...) over wharf-vswitch with seeded loss, duplication, reordering and corruption.
# During the run, SOAK_CYCLES times:
#   1. a PS is stopped with SIGTERM (drain, checkpoint) and restarted with --restore;
#   2. a worker is stopped with SIGTERM, another with SIGKILL; each is replaced by a new
#      process under a fresh worker id (a spare slot of the cluster: see "worker identity").
#      The SIGTERM must be a graceful stop: exit 0 within SOAK_STOP_MAX_MS (5000), "stopped
#      on SIGTERM" in its log, its JSON line with the pushes acknowledged; the SIGKILL that
#      follows 10 s later is a safety net only, and needing it is a failed check;
#   3. the servers' state is read from outside (wharf-ctl save + soak/ckpt_ledger.py) and
#      every worker's ledger must hold: value == highest applied sequence (lost 0, doubled 0);
#      for the worker stopped with SIGTERM, value == its acknowledged pushes (nothing it had
#      acknowledged lost, nothing half-sent applied; one more only when its stop gave up a
#      push in flight, which its JSON line says: "gave_up":true).
# Then once, at the end, the crash case: a PS checkpoint is taken (wharf-ctl save), traffic
# goes on, the PS is killed with SIGKILL and restarted from that checkpoint plus its
# write-ahead log (every push it acknowledged is in the log: ps_core/ps_wal.c); the final
# state must again satisfy the ledger, and the pushes acknowledged between the checkpoint and
# the kill must all be there (the log's replay count is printed). Last, each worker that ran
# to the end must have read back value == its pushes. Counts (pushes, applied, resent, lost, doubled, switch impairments) are
# printed as "soak:" lines and one JSON line; exit 0 only when every check held.
#
# Worker identity: a shard drops (and acknowledges) any push whose sequence is <= the last
# one it applied for that worker id, so a worker restarted under its old id must not number
# from 1 again: the client asks every server for its last applied sequence (PS_T_HELLO) and
# goes on after it. Replacements in the cycles take a fresh id; SOAK_SAME_ID=1 adds a final
# phase that restarts a worker under its old id and checks that all its pushes were applied
# (pass/fail).
#
# Knobs (env): SOAK_PS 1|2, SOAK_CYCLES, SOAK_PUSHES (per worker process), SOAK_DELAY_US,
# SOAK_PHASE_S (seconds of traffic between faults), SOAK_LOSS/DUP/REORDER/CORRUPT, SOAK_SEED,
# SOAK_SKIP_CRASH=1 (leave out the SIGKILL-of-a-PS phase: a run that otherwise passes exits 77,
# skipped), SOAK_BASE_PORT (control ports), SOAK_CKPT_INTERVAL (the servers' periodic
# checkpoint, s; default 2, so the log is cut and deleted several times during the run),
# SOAK_STOP_MAX_MS (how long a worker may take to stop on SIGTERM; default 5000: it waits for
# its push in flight, which a loaded host can hold up for seconds).
set -u
. "$(dirname "$0")/../cluster/tb.sh"
SOAK_DIR=$(cd "$(dirname "$0")" && pwd)

NPS=${SOAK_PS:-1}
CYCLES=${SOAK_CYCLES:-1}
PUSHES=${SOAK_PUSHES:-1500}
DELAY=${SOAK_DELAY_US:-2000}
PHASE=${SOAK_PHASE_S:-3}
BASE=${SOAK_BASE_PORT:-47860}
STOP_MAX_MS=${SOAK_STOP_MAX_MS:-5000}
NSLOT=$((2 + 2 * CYCLES + 1))   # 2 running, 2 replacements per cycle, 1 for SOAK_SAME_ID
IMPAIR="--loss ${SOAK_LOSS:-0.01} --dup ${SOAK_DUP:-0.01} --reorder ${SOAK_REORDER:-0.02}"
IMPAIR="$IMPAIR --corrupt ${SOAK_CORRUPT:-0.005} --seed ${SOAK_SEED:-7}"
FAILS=0
T0=$(date +%s)

soak() { printf 'soak: %s\n' "$*" >&2; }
soak_bad() { soak "CHECK FAILED: $*"; FAILS=$((FAILS + 1)); }

tb_init
MAP=$TB_DIR/.endpoint_map
PSL=""; WL=""
for s in $(seq 0 $((NPS - 1))); do
	echo "127.0.0.1:$((BASE + s))=10.78.0.$((s + 1)):6666" >>"$MAP"
	PSL="$PSL${PSL:+,}127.0.0.1:$((BASE + s))"
done
for w in $(seq 0 $((NSLOT - 1))); do
	echo "127.0.0.1:$((BASE + 20 + w))=10.78.0.$((w + 21)):5555" >>"$MAP"
	WL="$WL${WL:+,}127.0.0.1:$((BASE + 20 + w))"
done
CL="--ps $PSL --workers $WL --endpoint-map $MAP --protocol dpdk --mode async"
CL="$CL --retry-interval 1 --wait-timeout 60 --ckpt-interval ${SOAK_CKPT_INTERVAL:-2}"

declare -A PS_GEN=() SLOT_OF=()   # PS_GEN[s]: restarts of server s; SLOT_OF[name]: worker id
ps_name() { echo "ps$1g${PS_GEN[$1]}"; }

ps_start() { # SERVER [restore]
	local s=$1 name
	PS_GEN[$s]=$(( ${PS_GEN[$s]:--1} + 1 ))
	name=$(ps_name "$s")
	tb_node "$name" "$s" psd $CL --role ps --task-index "$s" --model count \
		--ckpt "$TB_DIR/ps$s.ckpt" ${2:+--restore "$TB_DIR/ps$s.ckpt"}
	tb_wait_log "$TB_DIR/$name.log" "serving" 30 || { cat "$TB_DIR/$name.log" >&2; tb_fail "$name did not start"; }
	soak "$name up${2:+ (restored from its checkpoint)}"
}

# Workers that a later fault kills push 4x as much, so they are still running when it comes;
# those of the last cycle push PUSHES and run to the end.
declare -A PUSHES_OF=()
w_start() { # NAME SLOT [PUSHES]
	SLOT_OF[$1]=$2
	PUSHES_OF[$1]=${3:-$PUSHES}
	tb_node "$1" $((NPS + $2)) train $CL --role worker --task-index "$2" --model count \
		--count-pushes "${PUSHES_OF[$1]}" --count-delay-us "$DELAY"
	soak "worker $1 started as worker id $2 (${PUSHES_OF[$1]} pushes)"
}

# The servers' state now: every PS writes a checkpoint into $1.<s>; prints the ledger JSON.
# A PS writing its periodic checkpoint refuses the save ("ask again when it is done"): asked
# again, 20 times at most. Status 1 when a PS did not save (its answer said on stderr). It
# runs in a command substitution, where soak_bad would count nothing: the caller counts it.
snapshot() { # TAG
	local s i ans rc files=()
	for s in $(seq 0 $((NPS - 1))); do
		for i in $(seq 1 20); do
			ans=$("$TB_BUILD/wharf-ctl" --timeout-ms 10000 "127.0.0.1:$((BASE + s))" save \
				"$TB_DIR/$1.$s" 2>&1)
			rc=$?
			[ $rc -ne 0 ] && [[ "$ans" == *"ask again"* ]] || break
			sleep 0.1
		done
		[ $rc -eq 0 ] || { soak "ps $s did not save ($1): $ans"; return 1; }
		files+=("$TB_DIR/$1.$s")
	done
	python3 "$SOAK_DIR/ckpt_ledger.py" "${files[@]}" | tee "$TB_DIR/ledger.$1"
}

# Ledger check of a snapshot: value == last_seq for every worker id.
check_ledger() { # TAG JSON
	python3 - "$1" "$2" <<'EOF' >&2
import json, sys
tag, led = sys.argv[1], json.loads(sys.argv[2])
bad = 0
for w, e in sorted(led["workers"].items(), key=lambda x: int(x[0])):
    lost = max(0, e["last_seq"] - e["value"]); doubled = max(0, e["value"] - e["last_seq"])
    print(f"soak: [{tag}] worker id {w}: applied {e['value']}, highest applied seq "
          f"{e['last_seq']}, lost {lost}, doubled {doubled}")
    bad += lost + doubled
sys.exit(1 if bad else 0)
EOF
}

wait_reconnect() { # WORKER-NAME... : each running one logs a reconnect (or has finished)
	local n
	for n in "$@"; do
		for _ in $(seq 1 300); do
			grep -q "reconnected to ps" "$TB_DIR/$n.log" 2>/dev/null && break
			kill -0 "${TB_PIDS[$n]}" 2>/dev/null || break
			sleep 0.1
		done
	done
}

running() { kill -0 "${TB_PIDS[$1]:-0}" 2>/dev/null; }

# SIGTERM: a graceful stop (see 2. above); the SIGKILL after 10 s is the safety net, a failed
# check when it is needed. ACKED_OF[name]: the pushes a worker stopped with SIGTERM had
# acknowledged; GAVE_UP_OF[name]: 1 when its stop gave up a request in flight.
declare -A ACKED_OF=() GAVE_UP_OF=()
kill_worker() { # NAME SIGNAL
	local pid=${TB_PIDS[$1]} t0 ms rc log=$TB_DIR/$1.log
	running "$1" || soak_bad "worker $1 had already exited before its SIG$2 (raise SOAK_PUSHES)"
	t0=$(date +%s%N)
	kill -"$2" "$pid" 2>/dev/null
	for _ in $(seq 1 500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.02; done
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null
		[ "$2" = TERM ] && soak_bad "worker $1 still ran $ms ms after its SIGTERM: killed with SIGKILL"
	fi
	wait "$pid" 2>/dev/null
	rc=$?
	unset "TB_PIDS[$1]"
	if [ "$2" != TERM ]; then
		soak "worker $1 (id ${SLOT_OF[$1]}) stopped with SIG$2"
		return
	fi
	[ "$rc" -eq 0 ] || soak_bad "worker $1 exited with status $rc on SIGTERM, not 0"
	[ "$ms" -le "$STOP_MAX_MS" ] || soak_bad "worker $1 took $ms ms to stop on SIGTERM (more than $STOP_MAX_MS)"
	grep -q "stopped on SIGTERM" "$log" || soak_bad "worker $1 did not log a stop on SIGTERM"
	grep -q '"stopped":"SIGTERM"' "$TB_DIR/$1.out" 2>/dev/null ||
		soak_bad "worker $1 printed no JSON line of its stop on SIGTERM"
	ACKED_OF[$1]=$(tb_json "$TB_DIR/$1.out" acked -1)
	GAVE_UP_OF[$1]=0; grep -q '"gave_up":true' "$TB_DIR/$1.out" && GAVE_UP_OF[$1]=1
	soak "worker $1 (id ${SLOT_OF[$1]}) stopped with SIGTERM: exit $rc, $ms ms; $(grep -o 'stopped on SIGTERM.*' "$log")"
}

# A worker stopped with SIGTERM: the servers hold exactly its acknowledged pushes.
check_stopped() { # NAME LEDGER-JSON
	python3 - "$1" "${SLOT_OF[$1]}" "${ACKED_OF[$1]:--1}" "${GAVE_UP_OF[$1]:-0}" "$2" <<'EOF' >&2
import json, sys
name, w, acked, gave_up = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
e = json.loads(sys.argv[5])["workers"].get(w, {"value": 0, "last_seq": 0})
ok = acked >= 0 and (e["value"] == acked or (gave_up and e["value"] == acked + 1))
print(f"soak: worker {name} (id {w}) stopped with SIGTERM after {acked} acknowledged pushes"
      f"{' (a request given up)' if gave_up else ''}: the servers hold {e['value']}"
      f"{'' if ok else ' (CHECK FAILED)'}")
sys.exit(0 if ok else 1)
EOF
}

tb_switch $((NPS + NSLOT)) $IMPAIR || tb_fail "switch"
soak "switch: $((NPS + NSLOT)) ports, $IMPAIR"
for s in $(seq 0 $((NPS - 1))); do ps_start "$s"; done
A=wa0; B=wb0; NEXT=2
BIG=$((4 * PUSHES))
w_start "$A" 0 "$BIG"; w_start "$B" 1 "$BIG"
ALL_W=("$A" "$B")

for c in $(seq 0 $((CYCLES - 1))); do
	sleep "$PHASE"
	s=$((c % NPS)); old=$(ps_name "$s")
	tb_stop "$old"   # SIGTERM: drain, checkpoint, close
	grep -q "checkpoint $TB_DIR/ps$s.ckpt" "$TB_DIR/$old.log" || soak_bad "$old wrote no checkpoint at SIGTERM"
	soak "cycle $c: $old stopped with SIGTERM"
	ps_start "$s" restore
	wait_reconnect "$A" "$B"
	sleep "$PHASE"
	if led=$(snapshot "c${c}term"); then
		check_ledger "cycle $c, after PS SIGTERM+restore" "$led" ||
			soak_bad "cycle $c: ledger broken after a PS SIGTERM/restart"
	else
		soak_bad "cycle $c: no snapshot after the PS SIGTERM/restart"
	fi

	kill_worker "$A" TERM
	TERMED=$A
	n=$BIG; [ "$c" -eq $((CYCLES - 1)) ] && n=$PUSHES
	A=wa$((c + 1)); w_start "$A" "$NEXT" "$n"; NEXT=$((NEXT + 1))
	sleep "$PHASE"
	kill_worker "$B" KILL
	B=wb$((c + 1)); w_start "$B" "$NEXT" "$n"; NEXT=$((NEXT + 1))
	ALL_W+=("$A" "$B")
	sleep "$PHASE"
	if led=$(snapshot "c${c}wk"); then
		check_ledger "cycle $c, after worker SIGTERM and SIGKILL" "$led" ||
			soak_bad "cycle $c: ledger broken after worker restarts"
		check_stopped "$TERMED" "$led" ||
			soak_bad "cycle $c: the servers do not hold exactly what $TERMED had acknowledged"
	else
		soak_bad "cycle $c: no snapshot after the worker restarts"
	fi
done

[ -n "${SOAK_SKIP_CRASH:-}" ] && tb_skip "the PS SIGKILL phase" "SOAK_SKIP_CRASH=1 leaves it out"
if [ -z "${SOAK_SKIP_CRASH:-}" ]; then
	s=$(( CYCLES % NPS )); old=$(ps_name "$s")
	"$TB_BUILD/wharf-ctl" --timeout-ms 10000 "127.0.0.1:$((BASE + s))" save >/dev/null ||
		soak_bad "$old: checkpoint before the crash failed"
	cp "$TB_DIR/ps$s.ckpt" "$TB_DIR/crash_base.$s"
	sleep "$PHASE"
	running "$A" && running "$B" || soak_bad "a worker finished before the crash (raise SOAK_PUSHES)"
	kill -KILL "${TB_PIDS[$old]}"; wait "${TB_PIDS[$old]}" 2>/dev/null; unset "TB_PIDS[$old]"
	soak "crash: $old killed with SIGKILL $PHASE s after the checkpoint above (and <= ${SOAK_CKPT_INTERVAL:-2} s after its last periodic one)"
	ps_start "$s" restore
	new=$(ps_name "$s")
	soak "crash: $(grep -m1 'restored from' "$TB_DIR/$new.log" | sed 's/^.* wharf\.wc: wharf-psd: //')"
	grep -q "records replayed" "$TB_DIR/$new.log" || soak_bad "$new did not replay its write-ahead log"
	wait_reconnect "$A" "$B"
fi

# The workers of the last cycle run to the end, bounded: a worker whose ledger stops moving
# for STALL_S seconds is stalled (the servers' status goes into the log), not waited for.
STALL_S=${SOAK_STALL_S:-20}; last=""; still=0
for _ in $(seq 1 $((2 * PUSHES * (DELAY + 3000) / 1000000 + 60))); do
	running "$A" || running "$B" || break
	sleep 1
	now=$(snapshot "progress" 2>/dev/null)
	if [ "$now" = "$last" ]; then still=$((still + 1)); else still=0; last=$now; fi
	[ "$still" -ge "$STALL_S" ] && break
done
for n in "$A" "$B"; do
	running "$n" || continue
	soak_bad "worker $n (id ${SLOT_OF[$n]}) stalled: no push applied for $still s; ps status:"
	for s in $(seq 0 $((NPS - 1))); do
		"$TB_BUILD/wharf-ctl" "127.0.0.1:$((BASE + s))" status 2>&1 | sed 's/^/  /' >&2
	done
	tail -n 3 "$TB_DIR/$n.log" >&2
	# Where it waits: the stack of every thread (gdb when installed), into the kept logs.
	command -v gdb >/dev/null && timeout 30 gdb -p "${TB_PIDS[$n]}" -batch \
		-ex "thread apply all bt" >"$TB_DIR/$n.stall-bt" 2>&1 &&
		soak "stack of $n in $(basename "$TB_DIR")/$n.stall-bt"
done
final=$(snapshot final) || tb_fail "final snapshot"
check_ledger "final" "$final" || soak_bad "final ledger: an applied sequence is missing"
if [ -z "${SOAK_SKIP_CRASH:-}" ]; then
	base=$(python3 "$SOAK_DIR/ckpt_ledger.py" "$TB_DIR/crash_base.$s")
	soak "crash: PS $s was restored from a checkpoint holding $base"
	# Which sequences went: the checkpoint is consistent (value == last_seq at its cut), the
	# server applied everything above it that arrived after the restart; the gap between is
	# what the crashed server acknowledged and no client ever sent again.
	python3 - "$base" "$final" <<'EOF' >&2 || soak_bad "crash: acknowledged pushes were lost"
import json, sys
b, f = json.loads(sys.argv[1])["workers"], json.loads(sys.argv[2])["workers"]
lost = 0
for w, e in sorted(b.items(), key=lambda x: int(x[0])):
    fin = f.get(w, e)
    after = fin["value"] - e["value"]            # applied since the saved checkpoint
    gap_hi = fin["last_seq"] - after             # last sequence before the resumed ones
    if gap_hi > e["last_seq"]:
        lost += gap_hi - e["last_seq"]
        print(f"soak: crash: worker id {w}: checkpoint cut at seq {e['last_seq']}, resumed at "
              f"seq {gap_hi + 1}; seqs {e['last_seq'] + 1}..{gap_hi} ({gap_hi - e['last_seq']}) "
              f"were acknowledged by the killed server and never applied again")
    else:
        print(f"soak: crash: worker id {w}: every sequence after the checkpoint's {e['last_seq']} "
              f"is applied ({after} since it), none lost")
sys.exit(1 if lost else 0)
EOF
fi
WARGS=()
for n in "${ALL_W[@]}"; do
	f=0; grep -q '"exactly_once"' "$TB_DIR/$n.out" 2>/dev/null && f=1
	if [ "$f" = 0 ] && [ "${ACKED_OF[$n]:--1}" -ge 0 ]; then
		WARGS+=("$n:${SLOT_OF[$n]}:${ACKED_OF[$n]}:1") # stopped: that many acknowledged
	else
		WARGS+=("$n:${SLOT_OF[$n]}:${PUSHES_OF[$n]}:$f")
	fi
	[ "$f" = 1 ] || [ "$n" = "$A" ] || [ "$n" = "$B" ] || continue
	grep -q '"exactly_once":true' "$TB_DIR/$n.out" 2>/dev/null ||
		soak_bad "worker $n (id ${SLOT_OF[$n]}) read back $(tb_json "$TB_DIR/$n.out" value '?') of ${PUSHES_OF[$n]}"
done

if [ -n "${SOAK_SAME_ID:-}" ]; then
	# A worker restarted under an id that already pushed: how many acknowledged pushes apply.
	# It reuses the switch port of the last worker with that id (same MAC and address).
	id=${SLOT_OF[$A]}; before=$(snapshot sameid0) || soak_bad "same id: no snapshot before"
	w_start wsame "$id" "$PUSHES"
	for _ in $(seq 1 $((2 * PUSHES * (DELAY + 3000) / 1000000 + 60))); do running wsame || break; sleep 1; done
	after=$(snapshot sameid1) || soak_bad "same id: no snapshot after"
	python3 - "$id" "$PUSHES" "$before" "$after" <<'EOF' >&2 || soak_bad "same id: a restarted worker's pushes were dropped as duplicates"
import json, sys
w, n = sys.argv[1], int(sys.argv[2]); b, a = json.loads(sys.argv[3]), json.loads(sys.argv[4])
applied = a["workers"][w]["value"] - b["workers"][w]["value"]
print(f"soak: [same id] worker id {w} restarted under its old id (the server's last sequence "
      f"for it was {b['workers'][w]['last_seq']}): {n} pushes acknowledged, {applied} applied, "
      f"{n - applied} dropped as duplicates")
sys.exit(0 if applied == n else 1)
EOF
	grep -q '"exactly_once":true' "$TB_DIR/wsame.out" 2>/dev/null ||
		soak_bad "same id: worker wsame read back $(tb_json "$TB_DIR/wsame.out" value '?') of $PUSHES"
	rm -f "$TB_DIR/ledger.sameid0" "$TB_DIR/ledger.sameid1"
fi

tb_stop switch   # it prints its counters at SIGTERM
python3 "$SOAK_DIR/soak_report.py" "$TB_DIR" "$FAILS" "$(( $(date +%s) - T0 ))" "${WARGS[@]}" ||
	tb_fail "fault soak: exactly-once did not hold (or $FAILS check(s) failed); see the soak: lines"
tb_pass "fault soak: exactly-once held through every restart"
