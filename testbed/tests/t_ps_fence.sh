#!/usr/bin/env bash
# Worker restarts and worker ids claimed twice, against a live PS (the "count" model):
#   1. sync mode over dpdk: worker 1 is killed with SIGKILL in the middle of the job and started
#      again under its id, until a kill fell between its push of a step and its barrier (the
#      PS's telemetry counts the repeated push as a duplicate; at most 4 kills). Every step,
#      every worker checks the model is the single-process sum of the pushes so far (its own
#      key counts the steps, no worker's key counts more, the shared key is their sum): a
#      restarted worker resumes at the servers' step and repeats the step its predecessor
#      was in without adding to it twice.
#   2. async over kernel TCP: a second process starts as worker 0 while the first still runs.
#      The first is refused from then on (a clear fatal error: a newer process took over this
#      worker id), the second's pushes all count: lost 0, doubled 0 (the second starts at
#      exactly what the first had acknowledged).
#   3. a PS restarted without its state (no checkpoint): the worker notices the new state
#      epoch at its hello and stops naming it (ps_lost_state fail, the default), or goes on
#      saying so (continue).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48700
tb_train_map $B 198.19.7
MAP=$TB_TRAIN_MAP
WL="127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2))"

wait_gone() { # NAME SECS
	for _ in $(seq 1 $(($2 * 10))); do kill -0 "${TB_PIDS[$1]}" 2>/dev/null || return 0; sleep 0.1; done
	return 1
}
killed() { # NAME: SIGKILL, its hugepage files gone with it
	kill -KILL "${TB_PIDS[$1]}" 2>/dev/null; wait "${TB_PIDS[$1]}" 2>/dev/null; unset "TB_PIDS[$1]"
	rm -f /dev/hugepages/wharf-"$TB_ID"-"$1"* 2>/dev/null
}

# ---- 1. sync: a worker killed and restarted under its id, until one kill fell after its push
STEPS=300
CL="--ps 127.0.0.1:$B --workers $WL --endpoint-map $MAP --protocol dpdk --mode sync"
CL="$CL --retry-interval 1 --wait-timeout 30"
dups() { # pushes the PS answered as duplicates (a restarted worker repeating its step's push)
	local n=0 i v
	for i in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
		v=$(printf '/wharf/ps/shard,%d\n' $i | timeout 15 dpdk-telemetry.py -f "wharf-$TB_ID-ps" 2>&1 |
			grep -o '"dup_pushes": [0-9]*' | grep -o '[0-9]*$')
		n=$((n + ${v:-0}))
	done
	echo $n
}
tb_switch 3 || tb_fail "switch"
tb_node ps 0 psd $CL --role ps --model count --barrier-timeout 10
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "ps did not start"; }
W="--role worker --model count --count-pushes $STEPS --count-delay-us 30000"
tb_node w0 1 train $CL $W --task-index 0
tb_node w1k0 2 train $CL $W --task-index 1
kills=0
while [ $kills -lt 4 ]; do
	sleep 1.2
	killed w1k$kills
	kills=$((kills + 1))
	tb_node w1k$kills 2 train $CL $W --task-index 1
	tb_wait_log "$TB_DIR/w1k$kills.log" "resumes at sync step" 20 || { cat "$TB_DIR/w1k$kills.log" >&2; tb_fail "the restarted worker did not resume"; }
	sleep 0.3
	[ "$(dups)" -gt 0 ] && break # a kill fell between a push and its barrier: the case to show
done
tb_log "worker 1 killed with SIGKILL $kills time(s) in the middle of its steps and started again"
last=w1k$kills
wait_gone $last 60 && wait_gone w0 20 || tb_fail "sync workers still running after 60 s"
for w in $last w0; do
	grep -q '"exactly_once":true' "$TB_DIR/$w.out" ||
		{ tail -n 5 "$TB_DIR/$w.log" "$TB_DIR/$w.out" >&2; tb_fail "$w: the model is not the single-process sum step by step"; }
done
first=$(tb_json "$TB_DIR/$last.out" first_step); dup=$(dups)
[ "$first" -gt 0 ] || tb_fail "the restarted worker 1 began at step $first, not where the servers were"
[ "$dup" -gt 0 ] || tb_fail "no restart repeated a step's push in $kills kills (each fell before a push)"
[ "$(tb_json "$TB_DIR/w0.out" shared)" -eq $((2 * STEPS)) ] && [ "$(tb_json "$TB_DIR/w0.out" value)" -eq $STEPS ] &&
	[ "$(tb_json "$TB_DIR/$last.out" value)" -eq $STEPS ] ||
	{ cat "$TB_DIR/w0.out" "$TB_DIR/$last.out" >&2; tb_fail "final values: lost or doubled steps"; }
tb_pass "sync, worker 1 killed $kills time(s) and restarted under its id: $STEPS steps, each the single-process sum (shared $(tb_json "$TB_DIR/w0.out" shared) = 2 x $STEPS; the step a kill interrupted repeated, $dup shard part(s) of it answered as already applied, not doubled; the last process resumed at step $first)"
tb_stop ps
tb_stop switch

# ---- 2. async: two processes claim worker id 0
CL="--ps 127.0.0.1:$B --num-workers 1 --protocol kernel --mode async --retry-interval 1 --wait-timeout 20"
"$TB_BUILD/wharf-psd" -- $CL --role ps --model count >"$TB_DIR/ps2.out" 2>"$TB_DIR/ps2.log" &
TB_PIDS[ps2]=$!
tb_wait_log "$TB_DIR/ps2.log" "serving" 20 || { cat "$TB_DIR/ps2.log" >&2; tb_fail "ps did not start"; }
"$TB_BUILD/wharf-train" -- $CL --role worker --task-index 0 --model count --count-pushes 5000 \
	--count-delay-us 1000 >"$TB_DIR/a.out" 2>"$TB_DIR/a.log" &
TB_PIDS[a]=$!
sleep 1.5
"$TB_BUILD/wharf-train" -- $CL --role worker --task-index 0 --model count --count-pushes 400 \
	--count-delay-us 1000 >"$TB_DIR/b.out" 2>"$TB_DIR/b.log" &
TB_PIDS[b]=$!
wait_gone b 30 && wait_gone a 10 || tb_fail "workers still running"
wait "${TB_PIDS[a]}"; arc=$?; unset "TB_PIDS[a]"
[ $arc -ne 0 ] || { cat "$TB_DIR/a.out" >&2; tb_fail "the first process of worker 0 went on after a newer one took the id"; }
grep -q "a newer process took over this worker id" "$TB_DIR/a.log" ||
	{ tail -n 5 "$TB_DIR/a.log" >&2; tb_fail "the first process was not told why it was refused"; }
grep -q '"exactly_once":true' "$TB_DIR/b.out" ||
	{ tail -n 5 "$TB_DIR/b.log" "$TB_DIR/b.out" >&2; tb_fail "the second process's pushes were not all applied once"; }
acked=$(tb_json "$TB_DIR/a.out" acked); start=$(tb_json "$TB_DIR/b.out" start)
[ "$acked" -gt 0 ] && [ "$acked" -eq "$start" ] ||
	{ cat "$TB_DIR/a.out" "$TB_DIR/b.out" >&2; tb_fail "the first process had $acked pushes acknowledged, the key held $start when the second began"; }
tb_pass "two processes as worker 0: the first refused ($(grep -m1 -o 'incarnation [0-9a-f]* is older[^:]*' "$TB_DIR/a.log")), lost 0, doubled 0 ($acked acknowledged to the first, 400 of 400 applied for the second)"

# ---- 3. a PS back without its state
restart_ps_empty() { # NAME
	kill -KILL "${TB_PIDS[ps2]}"; wait "${TB_PIDS[ps2]}" 2>/dev/null
	"$TB_BUILD/wharf-psd" -- $CL --role ps --model count >"$TB_DIR/$1.out" 2>"$TB_DIR/$1.log" &
	TB_PIDS[ps2]=$!
	tb_wait_log "$TB_DIR/$1.log" "serving" 20 || { cat "$TB_DIR/$1.log" >&2; tb_fail "ps did not restart"; }
}
for policy in fail continue; do
	"$TB_BUILD/wharf-train" -- $CL --role worker --task-index 0 --model count --count-pushes 3000 \
		--count-delay-us 1000 --ps-lost-state $policy >"$TB_DIR/l-$policy.out" 2>"$TB_DIR/l-$policy.log" &
	TB_PIDS[l]=$!
	sleep 1
	restart_ps_empty "ps-$policy"
	if [ $policy = fail ]; then
		wait_gone l 20 || tb_fail "the worker still runs with a PS that lost its state"
		wait "${TB_PIDS[l]}"; rc=$?; unset "TB_PIDS[l]"
		[ $rc -ne 0 ] || tb_fail "the worker ended well after its PS lost its state"
		grep -q "ps 0 (127.0.0.1:$B) came back without its state" "$TB_DIR/l-fail.log" ||
			{ tail -n 5 "$TB_DIR/l-fail.log" >&2; tb_fail "the worker did not name the PS that lost its state"; }
		tb_pass "ps_lost_state fail: $(grep -m1 -o 'ps 0 (.*came back without its state ([^)]*)' "$TB_DIR/l-fail.log")"
	else
		tb_wait_log "$TB_DIR/l-continue.log" "ps_lost_state continue: training goes on" 20 ||
			{ tail -n 5 "$TB_DIR/l-continue.log" >&2; tb_fail "the worker did not say it goes on with the empty PS"; }
		sleep 1
		kill -0 "${TB_PIDS[l]}" 2>/dev/null || { tail -n 5 "$TB_DIR/l-continue.log" >&2; tb_fail "the worker stopped though ps_lost_state is continue"; }
		tb_stop l
		tb_pass "ps_lost_state continue: the worker said so and went on"
	fi
done
tb_stop ps2
