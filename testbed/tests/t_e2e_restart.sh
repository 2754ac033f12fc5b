#!/usr/bin/env bash
# A PS killed (SIGTERM) in the middle of a job and restarted from its checkpoint: the workers
# lose the connection, wait for the server, reconnect, resend what was not acknowledged and
# go on. The exactly-once ledger ("count" model: every push adds exactly 1 to the worker's own
# key) must end at exactly the number of pushes for each worker: no accepted push lost (it is
# in the checkpoint) and none doubled (acknowledged before the save, or resent and applied
# once by the new server). protocol dpdk over the switch, async mode.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

PUSHES=${RESTART_PUSHES:-1500}
tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47740=198.19.0.1:6666\n127.0.0.1:47741=198.19.0.2:5555\n127.0.0.1:47742=198.19.0.3:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47740 --workers 127.0.0.1:47741,127.0.0.1:47742 --endpoint-map $MAP --protocol dpdk --mode async --retry-interval 1 --wait-timeout 40"
CK=$TB_DIR/ps.ckpt

tb_switch 3 || tb_fail "switch"
tb_node ps1 0 psd $CL --role ps --model count --ckpt "$CK"
tb_wait_log "$TB_DIR/ps1.log" "serving" 20 || { cat "$TB_DIR/ps1.log" >&2; tb_fail "ps did not start"; }
for i in 0 1; do
	tb_node w$i $((i + 1)) train $CL --role worker --task-index $i --model count \
		--count-pushes "$PUSHES" --count-delay-us 3000
done
sleep 2.5
tb_stop ps1   # SIGTERM: drain, checkpoint, close
grep -q "checkpoint $CK" "$TB_DIR/ps1.log" || { cat "$TB_DIR/ps1.log" >&2; tb_fail "no checkpoint at shutdown"; }
sleep 1
tb_node ps2 0 psd $CL --role ps --model count --ckpt "$CK" --restore "$CK"
for _ in $(seq 1 450); do
	kill -0 "${TB_PIDS[w0]}" 2>/dev/null || kill -0 "${TB_PIDS[w1]}" 2>/dev/null || break
	sleep 0.2
done
"$TB_BUILD/wharf-ctl" 127.0.0.1:47740 status | sed 's/^/  /' >&2
for i in 0 1; do
	out=$TB_DIR/w$i.out
	grep -q '"exactly_once":true' "$out" || { tail -n 10 "$TB_DIR/w$i.log" "$out" "$TB_DIR/ps2.log" >&2; tb_fail "worker $i: ledger $(tb_json "$out" value '?') of $PUSHES"; }
	grep -q "reconnected to ps 0" "$TB_DIR/w$i.log" || { cat "$TB_DIR/w$i.log" >&2; tb_fail "worker $i never reconnected (was the server killed mid-run?)"; }
	tb_pass "worker $i: $(tb_json "$out" value)/$PUSHES pushes counted once across the restart; $(grep 'reconnected' "$TB_DIR/w$i.log" | head -n 1 | sed 's/^.* wharf\.wc: wharf-train: //')"
done
"$TB_BUILD/wharf-ctl" 127.0.0.1:47740 shutdown >/dev/null
