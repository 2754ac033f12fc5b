#!/usr/bin/env bash
# DCTCP through a bottleneck: the switch's port to the server sends at most 2 Gbit/s from a
# FIFO of 300 frames (--rate-mbps, --queue-frames) and marks ECN-capable frames CE once 30
# wait (--ecn-k). Two clients stream 1 MiB messages into the server at once (incast), twice:
#   1. ECN on (TCP-lite's default): the switch marks frames, the server sees CE, the clients
#      cut their windows on the echoes (ce_marks, ecn_cuts from WHARF_TL_STATS=1);
#   2. WHARF_TCP_ECN=0 on every node: no marks, the FIFO overflows (tail drops).
# Shown: with ECN fewer frames are dropped at the port than without, by at least 4x, and fewer
# segments are resent; both runs move data without errors.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
SECS=${WHARF_ECN_SECONDS:-2}

tb_init
# tcp_stat LOG WORD: the number after WORD on the "tl_tcp:" line WHARF_TL_STATS=1 logs at exit.
tcp_stat() { tb_stat_num "$1" "wharf\.tl: tl_tcp: " "$2"; }
# port_stat WORD: the server's switch port (0) counter WORD from the switch's JSON line.
port_stat() {
	/usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["ports"][0][sys.argv[2]])' \
		"$TB_DIR/switch.out" "$1"
}

run() { # NAME ENV
	local name=$1 env=$2 sent=0 i
	tb_switch 3 --rate-mbps 2000 --queue-frames 300 --ecn-k 30 || tb_fail "$name: switch"
	env $env WHARF_TSO=0 WHARF_TL_STATS=1 "$TB_BUILD/wharf-perf" $(tb_eal "$name-srv" 0) -- \
		--ip 198.18.0.1/24 --server --port 7000 >"$TB_DIR/$name-srv.out" 2>"$TB_DIR/$name-srv.log" &
	TB_PIDS[$name-srv]=$!
	tb_wait_log "$TB_DIR/$name-srv.log" "server on port" 20 || tb_fail "$name: server did not come up"
	for i in 1 2; do
		timeout --kill-after=5 $((SECS + 20)) env $env WHARF_TSO=0 WHARF_TL_STATS=1 "$TB_BUILD/wharf-perf" \
			$(tb_eal "$name-c$i" "$i") -- --ip "198.18.0.$((i + 1))/24" --peer 198.18.0.1 \
			--port 7000 --mode stream --size 1048576 --seconds "$SECS" \
			>"$TB_DIR/$name-c$i.out" 2>"$TB_DIR/$name-c$i.log" &
		TB_PIDS[$name-c$i]=$!
	done
	for i in 1 2; do
		wait "${TB_PIDS[$name-c$i]}" || { tail -n 5 "$TB_DIR/$name-c$i.log" >&2; tb_fail "$name: client $i failed"; }
		unset "TB_PIDS[$name-c$i]"
		[ "$(tb_json "$TB_DIR/$name-c$i.out" errors)" = 0 ] || tb_fail "$name: client $i errors"
		sent=$((sent + $(tb_json "$TB_DIR/$name-c$i.out" msgs)))
	done
	tb_stop "$name-srv"
	tb_stop switch
	[ "$sent" -gt 0 ] || tb_fail "$name: nothing sent"
	DROPS=$(port_stat delay_full) MARKED=$(port_stat ce_marked) QMAX=$(port_stat queue_max)
	CE=$(tcp_stat "$TB_DIR/$name-srv.log" ce_marks)
	CUTS=$(( $(tcp_stat "$TB_DIR/$name-c1.log" ecn_cuts) + $(tcp_stat "$TB_DIR/$name-c2.log" ecn_cuts) ))
	RETRANS=$(( $(tcp_stat "$TB_DIR/$name-c1.log" retrans) + $(tcp_stat "$TB_DIR/$name-c2.log" retrans) ))
	tb_log "$name: $sent MiB sent; port: $MARKED marked CE, $DROPS dropped, at most $QMAX waiting; server: $CE CE seen; clients: $CUTS window cuts, $RETRANS resent"
}

run ecn ""
[ "$MARKED" -gt 0 ] || tb_fail "ecn: the switch marked nothing (queue at most $QMAX)"
[ "$CE" -gt 0 ] || tb_fail "ecn: the server saw no CE"
[ "$CUTS" -gt 0 ] || tb_fail "ecn: the clients never cut their windows"
ecn_drops=$DROPS ecn_retrans=$RETRANS
run plain "WHARF_TCP_ECN=0"
[ "$MARKED" = 0 ] && [ "$CE" = 0 ] && [ "$CUTS" = 0 ] || tb_fail "plain: ECN was used ($MARKED, $CE, $CUTS)"
[ "$DROPS" -gt 0 ] || tb_fail "plain: the FIFO never overflowed: the bottleneck is not one"
[ $((ecn_drops * 4)) -le "$DROPS" ] || tb_fail "ecn dropped $ecn_drops frames at the port, without ECN $DROPS"
[ "$ecn_retrans" -lt "$RETRANS" ] || tb_fail "ecn resent $ecn_retrans segments, without ECN $RETRANS"
tb_pass "DCTCP at a 2 Gbit/s port: $ecn_drops drops and $ecn_retrans resent with ECN, $DROPS and $RETRANS without"
