#!/usr/bin/env bash
# A checkpoint asked for on the control endpoint (`wharf-ctl save`) is written while the PS
# keeps serving: lane 0 makes the cut, copies rows as it serves, and a thread writes and
# fsyncs the file; the save is answered when the file is in place. Over kernel TCP on
# 127.0.0.1 (seconds, no switch): wharf-psd with WHARF_TEST_SAVE_DELAY_MS=4000 (its writer
# waits, as a slow disk would) and a wharf-ps-bench worker pushing and pulling. During the
# save, `wharf-ctl status` (served by lane 0 too) must answer within a second twice, its
# message count growing between the two; the save answers "ok saved" after the delay, and
# the file loads (`wharf-psd --restore`). A second save while one is written is refused
# with the reason. When lane 0 itself waited for the write, status answered only after it.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48970
MODEL="$TB_ROOT/configs/model_30.json"
CL="--protocol kernel --ps 127.0.0.1:$B --num-workers 1 --mode async --wait-timeout 20 --retry-interval 1"
mkdir -p "$TB_DIR/ck"

WHARF_TEST_SAVE_DELAY_MS=4000 tb_node ps 0 psd $CL --role ps --ckpt "$TB_DIR/ck/m.ckpt" \
	--ckpt-interval 0 --model-file "$MODEL"
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "the server did not come up"; }
tb_node w 1 ps-bench $CL --role worker --model-file "$MODEL" --seconds 30
tb_wait_log "$TB_DIR/w.log" "connected to" 20 || { cat "$TB_DIR/w.log" >&2; tb_fail "the worker did not connect"; }
sleep 1

msgs() { sed -nE 's/^lcore +0 +msgs_in ([0-9]+).*/\1/p' "$1" | head -n 1; }

t0=$(date +%s%N)
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B save snap.ckpt >"$TB_DIR/save.out" 2>&1 &
save_pid=$!
sleep 0.5
timeout 1 "$TB_BUILD/wharf-ctl" 127.0.0.1:$B status >"$TB_DIR/st1.out" 2>&1 ||
	tb_fail "status during the save: no answer within 1 s (lane 0 waited for the disk)"
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B save other.ckpt >"$TB_DIR/save2.out" 2>&1
grep -q "is being written" "$TB_DIR/save2.out" ||
	tb_fail "a second save during the first: $(cat "$TB_DIR/save2.out")"
sleep 0.5
timeout 1 "$TB_BUILD/wharf-ctl" 127.0.0.1:$B status >"$TB_DIR/st2.out" 2>&1 ||
	tb_fail "status during the save: no answer within 1 s (lane 0 waited for the disk)"
kill -0 $save_pid 2>/dev/null || tb_fail "the save answered before its writer was done: $(cat "$TB_DIR/save.out")"
wait $save_pid || tb_fail "save: $(cat "$TB_DIR/save.out")"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
m1=$(msgs "$TB_DIR/st1.out") m2=$(msgs "$TB_DIR/st2.out")
[ -n "$m1" ] && [ -n "$m2" ] && [ "$m2" -gt "$m1" ] ||
	tb_fail "lane 0 did not serve during the save: msgs_in $m1 then $m2"
grep -q "^ok saved [0-9]* rows to .*/snap.ckpt" "$TB_DIR/save.out" || tb_fail "save: $(cat "$TB_DIR/save.out")"
[ "$ms" -ge 3900 ] || tb_fail "the save answered after $ms ms, before its 4000 ms writer"
tb_pass "save answered after $ms ms ($(cat "$TB_DIR/save.out")); meanwhile lane 0 served msgs_in $m1 -> $m2 and refused a second save"

tb_stop w
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B shutdown >/dev/null
tb_wait_log "$TB_DIR/ps.log" "stopped after" 20 || tb_fail "the server did not stop"
tb_stop ps
timeout 20 "$TB_BUILD/wharf-psd" -- --protocol kernel --ps 127.0.0.1:$((B + 1)) --num-workers 1 \
	--mode async --role ps --model-file "$MODEL" --restore "$TB_DIR/ck/snap.ckpt" --wal-dir none \
	>"$TB_DIR/r.out" 2>"$TB_DIR/r.log" &
r_pid=$!
tb_wait_log "$TB_DIR/r.log" "restored from" 20 || { cat "$TB_DIR/r.log" >&2; tb_fail "the saved file does not load"; }
"$TB_BUILD/wharf-ctl" 127.0.0.1:$((B + 1)) shutdown >/dev/null
wait $r_pid
tb_pass "the saved file loads: $(grep -o 'restored from .*' "$TB_DIR/r.log")"
