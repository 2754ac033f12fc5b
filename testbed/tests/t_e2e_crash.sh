#!/usr/bin/env bash
# A PS killed with SIGKILL in the middle of a job (no drain, no final checkpoint) and restarted
# from its last periodic checkpoint plus its write-ahead log (<ckpt>.wal: every push it
# acknowledged was logged before the acknowledgement, ps_core/ps_wal.c). The workers lose the
# connection, wait for the server, say hello (they go on numbering after the last sequence it
# applied), resend what was not acknowledged and go on. The exactly-once ledger ("count"
# model: every push adds exactly 1 to the worker's own key) must end at exactly the number of
# pushes for each worker: nothing acknowledged lost with the killed process, nothing doubled.
# Then worker 0 is started again under its old id and must have all its pushes applied.
# protocol dpdk over the switch, async mode. The SIGTERM twin: t_e2e_restart.sh.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

PUSHES=${CRASH_PUSHES:-1500}
tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47750=198.19.0.1:6666\n127.0.0.1:47751=198.19.0.2:5555\n127.0.0.1:47752=198.19.0.3:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47750 --workers 127.0.0.1:47751,127.0.0.1:47752 --endpoint-map $MAP --protocol dpdk --mode async --retry-interval 1 --wait-timeout 40"
CK=$TB_DIR/ps.ckpt

tb_switch 3 || tb_fail "switch"
tb_node ps1 0 psd $CL --role ps --model count --ckpt "$CK" --ckpt-interval 1
tb_wait_log "$TB_DIR/ps1.log" "serving" 20 || { cat "$TB_DIR/ps1.log" >&2; tb_fail "ps did not start"; }
for i in 0 1; do
	tb_node w$i $((i + 1)) train $CL --role worker --task-index $i --model count \
		--count-pushes "$PUSHES" --count-delay-us 3000
done
sleep 3.5
grep -q "periodic checkpoint" "$TB_DIR/ps1.log" || { cat "$TB_DIR/ps1.log" >&2; tb_fail "no periodic checkpoint before the kill"; }
kill -KILL "${TB_PIDS[ps1]}"; wait "${TB_PIDS[ps1]}" 2>/dev/null; unset "TB_PIDS[ps1]"
tb_log "ps1 killed with SIGKILL; log holds $(ls "$CK.wal" | wc -l) segment(s)"
sleep 1
tb_node ps2 0 psd $CL --role ps --model count --ckpt "$CK" --restore "$CK" --ckpt-interval 1
tb_wait_log "$TB_DIR/ps2.log" "serving" 20 || { cat "$TB_DIR/ps2.log" >&2; tb_fail "ps did not restart"; }
rep=$(grep -m1 "restored from" "$TB_DIR/ps2.log" | sed 's/^.* wharf\.wc: wharf-psd: //')
tb_log "$rep"
echo "$rep" | grep -qE "log .*: [1-9][0-9]* segments?, [1-9][0-9]* records replayed" ||
	tb_fail "the restarted server replayed no log records (was the log written?)"
for _ in $(seq 1 450); do
	kill -0 "${TB_PIDS[w0]}" 2>/dev/null || kill -0 "${TB_PIDS[w1]}" 2>/dev/null || break
	sleep 0.2
done
for i in 0 1; do
	out=$TB_DIR/w$i.out
	grep -q '"exactly_once":true' "$out" || { tail -n 10 "$TB_DIR/w$i.log" "$out" "$TB_DIR/ps2.log" >&2; tb_fail "worker $i: ledger $(tb_json "$out" value '?') of $PUSHES after a PS SIGKILL"; }
	grep -q "reconnected to ps 0" "$TB_DIR/w$i.log" || { cat "$TB_DIR/w$i.log" >&2; tb_fail "worker $i never reconnected (was the server killed mid-run?)"; }
	tb_pass "worker $i: $(tb_json "$out" value)/$PUSHES pushes counted once across a PS SIGKILL"
done
# The same worker id again: its numbering resumes after what the server applied.
tb_node w0again 1 train $CL --role worker --task-index 0 --model count --count-pushes 200 --count-delay-us 1000
for _ in $(seq 1 200); do kill -0 "${TB_PIDS[w0again]}" 2>/dev/null || break; sleep 0.2; done
grep -q '"exactly_once":true' "$TB_DIR/w0again.out" || { tail -n 5 "$TB_DIR/w0again.log" "$TB_DIR/w0again.out" >&2; tb_fail "worker 0 restarted under its old id: $(tb_json "$TB_DIR/w0again.out" value '?') of 200 pushes applied"; }
tb_pass "worker 0 restarted under its old id: 200/200 pushes applied (started at $(tb_json "$TB_DIR/w0again.out" start))"
"$TB_BUILD/wharf-ctl" 127.0.0.1:47750 shutdown >/dev/null
