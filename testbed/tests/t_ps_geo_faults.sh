#!/usr/bin/env bash
# GEO through lost GEO-pull replies and PS restarts: two workers run the GEO ledger
# (wharf-train --model count --mode geo, apps/train/tr_geo_ledger.c: each round a worker
# moves its counter row and a fresh row locally, pushes the deltas, GEO-pulls the others'
# rows) against a PS that drops every 20th GEO-pull reply and closes that connection
# (WHARF_TEST_DROP_GEO_REPLY), and that is killed with SIGKILL mid-run and restarted from its
# periodic checkpoint and log, then stopped with SIGTERM (drained, checkpointed: the GEO log
# and positions come back from the checkpoint alone) and started again. Each worker checks,
# bit for bit: every round's push applied once (lost 0, doubled 0), its counter on the
# server equal to the sum of the deltas it pushed (and, with what it holds, to its whole
# change), every row of the other worker seen through the GEO pulls, the other's counter as
# held equal to the server's. protocol dpdk over the switch.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

ROUNDS=${GEO_FAULT_ROUNDS:-900}
tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:48060=198.19.0.1:6666\n127.0.0.1:48061=198.19.0.2:5555\n127.0.0.1:48062=198.19.0.3:5555\n' >"$MAP"
CL="--ps 127.0.0.1:48060 --workers 127.0.0.1:48061,127.0.0.1:48062 --endpoint-map $MAP --protocol dpdk --mode geo --retry-interval 1 --wait-timeout 40"
CK=$TB_DIR/ps.ckpt
export WHARF_TEST_DROP_GEO_REPLY=20

tb_switch 3 || tb_fail "switch"
tb_node ps1 0 psd $CL --role ps --model count --ckpt "$CK" --ckpt-interval 1
tb_wait_log "$TB_DIR/ps1.log" "serving" 20 || { cat "$TB_DIR/ps1.log" >&2; tb_fail "ps did not start"; }
for i in 0 1; do
	tb_node w$i $((i + 1)) train $CL --role worker --task-index $i --model count \
		--count-pushes "$ROUNDS" --count-delay-us 4000
done
tb_wait_log "$TB_DIR/ps1.log" "periodic checkpoint" 20 || { cat "$TB_DIR/ps1.log" >&2; tb_fail "no periodic checkpoint before the kill"; }
sleep 0.7
kill -KILL "${TB_PIDS[ps1]}"; wait "${TB_PIDS[ps1]}" 2>/dev/null; unset "TB_PIDS[ps1]"
drops1=$(grep -c "GEO-pull reply [0-9]* dropped" "$TB_DIR/ps1.log")
tb_log "ps1 killed with SIGKILL after dropping $drops1 GEO-pull replies"
sleep 0.5
tb_node ps2 0 psd $CL --role ps --model count --ckpt "$CK" --restore "$CK" --ckpt-interval 1
tb_wait_log "$TB_DIR/ps2.log" "serving" 20 || { cat "$TB_DIR/ps2.log" >&2; tb_fail "ps did not restart"; }
rep=$(grep -m1 "restored from" "$TB_DIR/ps2.log" | sed 's/^.* wharf\.wc: wharf-psd: //')
tb_log "$rep"
echo "$rep" | grep -qE "restored from .*ps.ckpt; log .*[1-9][0-9]* records replayed" ||
	tb_fail "the restarted server did not restore its checkpoint and replay its log"
tb_wait_log "$TB_DIR/ps2.log" "GEO-pull reply [0-9]* dropped" 20 || tb_fail "the restarted server dropped no GEO-pull reply (did the workers come back?)"
sleep 0.5
kill -0 "${TB_PIDS[w0]}" 2>/dev/null && kill -0 "${TB_PIDS[w1]}" 2>/dev/null ||
	tb_fail "a worker ended before the SIGTERM (raise GEO_FAULT_ROUNDS)"
tb_stop ps2
drops2=$(grep -c "GEO-pull reply [0-9]* dropped" "$TB_DIR/ps2.log")
tb_log "ps2 stopped with SIGTERM after dropping $drops2 GEO-pull replies"
tb_node ps3 0 psd $CL --role ps --model count --ckpt "$CK" --restore "$CK" --ckpt-interval 1
tb_wait_log "$TB_DIR/ps3.log" "serving" 20 || { cat "$TB_DIR/ps3.log" >&2; tb_fail "ps did not start again"; }
for _ in $(seq 1 450); do
	kill -0 "${TB_PIDS[w0]}" 2>/dev/null || kill -0 "${TB_PIDS[w1]}" 2>/dev/null || break
	sleep 0.2
done
drops3=$(grep -c "GEO-pull reply [0-9]* dropped" "$TB_DIR/ps3.log")
[ "$drops1" -gt 0 ] && [ "$drops2" -gt 0 ] && [ "$drops3" -gt 0 ] || tb_fail "GEO-pull replies dropped: $drops1, $drops2, $drops3 by the three servers (expected some by each)"
for i in 0 1; do
	out=$TB_DIR/w$i.out
	grep -q '"exactly_once":true' "$out" || { tail -n 12 "$TB_DIR/w$i.log" "$out" "$TB_DIR/ps2.log" >&2; tb_fail "worker $i: GEO ledger after dropped replies and PS restarts: applied $(tb_json "$out" applied '?'), lost $(tb_json "$out" lost '?'), doubled $(tb_json "$out" doubled '?') of $ROUNDS; counter $(tb_json "$out" counter '?') (expected $(tb_json "$out" counter_expected '?')), handed in $(tb_json "$out" handed_in '?') of $(tb_json "$out" change '?'); seen $(tb_json "$out" seen '?') of $(tb_json "$out" seen_expected '?')"; }
	rc=$(grep -c "reconnected to ps 0" "$TB_DIR/w$i.log")
	[ "$rc" -ge 3 ] || { cat "$TB_DIR/w$i.log" >&2; tb_fail "worker $i reconnected $rc time(s): expected the dropped replies and the kill to cost it some"; }
	tb_pass "worker $i: $(tb_json "$out" applied)/$ROUNDS rounds applied once (lost $(tb_json "$out" lost), doubled $(tb_json "$out" doubled)), counter exact, handed in $(tb_json "$out" handed_in) of $(tb_json "$out" change), $(tb_json "$out" seen)/$(tb_json "$out" seen_expected) of the other's rows seen; $rc reconnects"
done
tb_log "GEO-pull replies dropped: $drops1 before the SIGKILL, $drops2 before the SIGTERM, $drops3 after"
"$TB_BUILD/wharf-ctl" 127.0.0.1:48060 shutdown >/dev/null
