#!/usr/bin/env bash
# Small messages sent by copy (tl_send_copy) over TCP-lite through the switch: a wharf-perf
# echo server answers every message of up to 128 B by copy, straight into its connection's
# send arena, holding nothing. Windows of up to 1024 messages in flight make one input
# burst echo more than a 64 KiB arena holds, so the arena is handed over full while input
# is still running and a fresh one taken. Shown: for bodies of 1, 64, 128 (the copy limit)
# and 129 B (queued, zero copy), every echo arrives intact and exactly as many as were sent
# (--count, --verify); then a 64 B stream that the client itself writes by copy (no echo
# counted) runs without errors, and the server dropped no echo.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
COUNT=${WHARF_COPY_COUNT:-40000}

tb_init
tb_switch 2 || tb_fail switch
tb_node srv 1 perf --ip 198.18.0.2/24 --server --port 7000 --echo --seconds 60
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || tb_fail "perf server did not come up"
for size in 1 64 128 129; do
	tb_run cli$size 0 30 perf --ip 198.18.0.1/24 --peer 198.18.0.2 --port 7000 \
		--mode stream --size $size --echo --verify --count "$COUNT" --seconds 25 \
		|| { tail -n 5 "$TB_DIR/cli$size.log" >&2; tb_fail "$size B: client failed"; }
	out=$TB_DIR/cli$size.out
	[ "$(tb_json "$out" msgs)" = "$COUNT" ] || tb_fail "$size B: $(tb_json "$out" msgs) echoes of $COUNT"
	[ "$(tb_json "$out" errors)" = 0 ] || tb_fail "$size B: client errors"
	[ "$(tb_json "$out" corrupt)" = 0 ] || tb_fail "$size B: corrupt echoes"
done
tb_pass "stream echoes of 1, 64, 128 and 129 B: $COUNT each, intact"
tb_run clis 0 20 perf --ip 198.18.0.1/24 --peer 198.18.0.2 --port 7000 --mode stream \
	--size 64 --seconds 2 || tb_fail "copy-send stream client failed"
[ "$(tb_json "$TB_DIR/clis.out" errors)" = 0 ] || tb_fail "copy-send stream: client errors"
sent=$(tb_json "$TB_DIR/clis.out" msgs)
[ "${sent:-0}" -gt 0 ] || tb_fail "copy-send stream sent nothing"
tb_stop srv
cat "$TB_DIR/clis.out" "$TB_DIR/srv.out"
got=$(tb_json "$TB_DIR/srv.out" msgs)
# The server took in every echoed message, and of the copy-send stream all but what was
# still in flight when the client stopped (its send buffer: at most 4 MiB, ~44k messages).
[ "${got:-0}" -ge $((4 * COUNT + sent - 50000)) ] || tb_fail "server got ${got:-none} messages"
[ "$(tb_json "$TB_DIR/srv.out" echo_dropped)" = 0 ] || tb_fail "server dropped echoes: $(cat "$TB_DIR/srv.out")"
[ "$(tb_json "$TB_DIR/srv.out" errors)" = 0 ] || tb_fail "server errors"
tb_pass "copy-send 64 B stream: $sent messages in 2 s, no errors, no echo dropped"
