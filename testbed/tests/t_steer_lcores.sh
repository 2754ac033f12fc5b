#!/usr/bin/env bash
# Software flow steering end to end (docs/architecture.md): a wharf-perf echo server
# and a client, each on 2 lcores sharing a one-queue virtio-user port on the vswitch. Lcore 0
# of each hands every TCP segment to the lcore owning its flow and sends the other lcore's
# frames. 8 connections, a bounded number of echoes each, every echo checked byte for byte
# (--verify). Shown: all messages echoed intact, both server lcores accepted connections
# and carried messages, both client lcores too, segments were steered (steered_in > 0 on
# lcore 1), no ring-full drops, and both processes ran in SLEEP idle mode (they slept).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

CONNS=8
COUNT=${WHARF_STEER_COUNT:-300}

# tb_eal pins a node to one core; this test wants lcores 0 and 1 in each process.
eal2() { tb_eal "$1" "$2" | sed -E 's/^-l [0-9]+/-l 0-1/'; }

tb_init
tb_switch 2 || tb_fail "switch"
"$TB_BUILD/wharf-perf" $(eal2 server 1) -- --ip 198.18.0.2/24 --server --port 7100 --echo \
	--lcores 2 --seconds 38 >"$TB_DIR/server.out" 2>"$TB_DIR/server.log" &
TB_PIDS[server]=$!
tb_wait_log "$TB_DIR/server.log" "server on port" 10 || { cat "$TB_DIR/server.log" >&2; tb_fail "server did not start"; }
# The client without the spin after work (WHARF_IDLE_SPIN_US=0): its run lasts some 25 ms of
# steady ping-pong, which a 2 ms spin bridges on a fast host, so its lcore 0 may never sleep;
# without the spin each lcore sleeps between its echoes and is woken by steered frames.
WHARF_IDLE_SPIN_US=0 timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" $(eal2 client 0) -- --ip 198.18.0.1/24 \
	--peer 198.18.0.2 --port 7100 --lcores 2 --connections $CONNS --count "$COUNT" --verify \
	--seconds 25 >"$TB_DIR/client.out" 2>"$TB_DIR/client.log"
crc=$?
tb_stop server
cat "$TB_DIR/client.out" "$TB_DIR/server.out"
[ $crc -eq 0 ] || { tail -n 20 "$TB_DIR/client.log" >&2; tb_fail "client exited $crc"; }

# Array field of the last JSON line: tb_jarr FILE KEY -> "a b"
jarr() { grep '^{' "$1" | tail -n 1 | sed -E "s/.*\"$2\":\[([0-9,]*)\].*/\1/" | tr ',' ' '; }
jstr() { grep '^{' "$1" | tail -n 1 | sed -E "s/.*\"$2\":\"([a-z]*)\".*/\1/"; }
all_pos() { for v in $1; do [ "$v" -gt 0 ] 2>/dev/null || return 1; done; [ -n "$1" ]; }

want=$((CONNS * COUNT))
msgs=$(tb_json "$TB_DIR/client.out" msgs)
[ "$msgs" = "$want" ] || tb_fail "client got $msgs echoes, want $want"
[ "$(tb_json "$TB_DIR/client.out" errors)" = 0 ] || tb_fail "client errors"
[ "$(tb_json "$TB_DIR/client.out" corrupt)" = 0 ] || tb_fail "corrupt echoes"
for f in client server; do
	out=$TB_DIR/$f.out
	grep -q '^{' "$out" || tb_fail "$f printed no JSON"
	all_pos "$(jarr "$out" lcore_msgs)" || tb_fail "$f: a lcore carried no messages: $(jarr "$out" lcore_msgs)"
	all_pos "$(jarr "$out" lcore_conns)" || tb_fail "$f: a lcore had no connection: $(jarr "$out" lcore_conns)"
	[ "$(jarr "$out" steered_in | awk '{print $2}')" -gt 0 ] || tb_fail "$f: nothing steered to lcore 1"
	[ "$(tb_json "$out" steer_drops)" = 0 ] || tb_fail "$f: ring-full drops"
	[ "$(jstr "$out" idle)" = sleep ] || tb_fail "$f: not in sleep idle mode"
	all_pos "$(jarr "$out" idle_sleeps)" || tb_fail "$f: a lcore never slept: $(jarr "$out" idle_sleeps)"
done
[ "$(tb_json "$TB_DIR/server.out" msgs)" = "$want" ] || tb_fail "server saw $(tb_json "$TB_DIR/server.out" msgs) messages, want $want"
tb_pass "$want echoes intact over 2+2 lcores; server lcore msgs $(jarr "$TB_DIR/server.out" lcore_msgs), client $(jarr "$TB_DIR/client.out" lcore_msgs); steered_in server $(jarr "$TB_DIR/server.out" steered_in)"
