#!/usr/bin/env bash
# A Linux reader blocked in recv() is reset when wharf aborts its connection, over a TAP
# device: wharf-xfer (TCP-lite on net_tap) connects to testbed/interop/xfer_peer.py's sink
# (Linux TCP, blocking recv() calls), sends 8 messages of 4 KiB and resets the connection
# with --abort-after-ms (tl_abort).
#   1. Every byte acknowledged (snd_nxt = snd_max): the reader gets ECONNRESET.
#   2. Linux's ACKs dropped by an nftables rule on the TAP (its SYN-ACK and RSTs pass):
#      Linux holds every byte wharf sent, wharf's retransmission timer fires and pulls
#      snd_nxt back below snd_max, and the abort comes then. The RST must carry snd_max,
#      Linux's RCV.NXT: one at snd_nxt lies below Linux's window, is dropped without a
#      word (RFC 5961), and the reader waits until its time is up.
# Pass: in both the reader, blocked in recv() for more than 0.2 s, gets ECONNRESET, not
# a timeout; wharf's counters (WHARF_TL_STATS=1) show the RST sent, and in 2 timeouts and
# the connection's `rewound` (snd_max - snd_nxt) above 0 as it was reset.
# Everything runs in a network namespace of its own (the TAP, Linux's address, the
# nftables table), removed on exit. Bounded: about 3 s passing, 10 s failing.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
NS=wxa$$
IF=wxa$$
LNX=198.18.9.1; WH=198.18.9.2
PORT1=7201; PORT2=7202
PY=/usr/bin/python3
PEER="$TB_ROOT/testbed/interop/xfer_peer.py"
SINK_SECS=6
export WHARF_TL_STATS=1

t_cleanup() {
	local rc=$?
	tb_stop sink
	ip netns del "$NS" 2>/dev/null
	(exit $rc)
	tb_cleanup exit
}
trap t_cleanup EXIT
trap 'exit 130' INT TERM

command -v nft >/dev/null || tb_fail "nft not found (nftables: testbed/deps.sh installs it)"
ip netns add "$NS" || tb_fail "cannot create network namespace $NS"
nsx() { ip netns exec "$NS" "$@"; }
nsx ip link set lo up
nsx ip tuntap add dev "$IF" mode tap multi_queue || tb_fail "cannot create TAP $IF"
nsx ip addr add $LNX/24 dev "$IF" && nsx ip link set "$IF" up || tb_fail "cannot configure $IF"

# One step: the Linux sink on PORT, wharf-xfer connecting to it and aborting after 600 ms.
# Results in $TB_DIR/sinkN.out (the reader's JSON) and cliN.out/.log (wharf's JSON, counters).
abort_step() { # N PORT
	local n=$1 port=$2
	timeout --kill-after=5 $((SINK_SECS + 5)) ip netns exec "$NS" $PY "$PEER" sink --bind $LNX \
		--port "$port" --seconds $SINK_SECS >"$TB_DIR/sink$n.out" 2>"$TB_DIR/sink$n.log" &
	TB_PIDS[sink]=$!
	tb_wait_log "$TB_DIR/sink$n.log" "sink on" 10 || tb_fail "step $n: the Linux sink did not start"
	timeout --kill-after=5 20 ip netns exec "$NS" "$TB_BUILD/wharf-xfer" -l 0 \
		--file-prefix "wharf-$TB_ID-cli$n" --no-pci $(tb_mem_args) --log-level='*:warning' \
		--log-level='wharf.*:info' --log-level=pmd.net.tap:error --vdev="net_tap0,iface=$IF" -- \
		--ip $WH/24 --peer $LNX --port "$port" --count 8 --min-size 4096 --max-size 4096 \
		--abort-after-ms 600 --seconds 10 >"$TB_DIR/cli$n.out" 2>"$TB_DIR/cli$n.log"
	echo "step $n: wharf-xfer exit $?: $(cat "$TB_DIR/cli$n.out")"
	grep -E ' wharf\.tl: tl_(tcp|conn):' "$TB_DIR/cli$n.log"
	wait "${TB_PIDS[sink]}"
	unset "TB_PIDS[sink]"
	echo "step $n: Linux reader: $(cat "$TB_DIR/sink$n.out")"
}

# A number after WORD on the "tl_tcp:" or "tl_conn:" line of a step's log (after the line's
# "<time> INFO wharf.tl: ").
counter() { # N LINE WORD
	sed -n "s/^.* wharf\.tl: $2: .* $3 \([0-9]*\).*/\1/p" "$TB_DIR/cli$1.log" | tail -n 1
}

# The reader ended by a reset while blocked in recv(); wharf sent a RST and its client passed.
check_reset() { # N WHAT
	local n=$1 end blocked
	end=$(sed -n 's/.*"end": "\([a-z]*\)".*/\1/p' "$TB_DIR/sink$n.out")
	blocked=$(sed -n 's/.*"last_recv_blocked_s": \([0-9.]*\).*/\1/p' "$TB_DIR/sink$n.out")
	blocked=${blocked:-0}
	[ "$end" = reset ] && awk -v b="$blocked" 'BEGIN { exit !(b > 0.2) }' \
		|| { tb_log "FAIL: step $n ($2): the Linux reader ended by '${end:-nothing}' after" \
			"$blocked s in recv(), not by a reset"; return 1; }
	[ "$(tb_json "$TB_DIR/cli$n.out" aborted 0)" = 1 ] && grep -q '"ok":true' "$TB_DIR/cli$n.out" \
		|| { tb_log "FAIL: step $n ($2): wharf-xfer did not abort its connection cleanly"; return 1; }
	[ "$(counter "$n" tl_tcp rst_out)" -ge 1 ] 2>/dev/null \
		|| { tb_log "FAIL: step $n ($2): wharf's counters show no RST sent"; return 1; }
	tb_pass "step $n ($2): the Linux reader, blocked in recv() for $blocked s, got ECONNRESET"
}

fail=0
# ---- 1: everything acknowledged ------------------------------------------------------------
abort_step 1 $PORT1
check_reset 1 "all acknowledged" || fail=1
rw1=$(counter 1 tl_conn rewound)
[ "${rw1:-x}" = 0 ] || { tb_log "FAIL: step 1: rewound '${rw1:-?}', expected 0 with every byte acknowledged"; fail=1; }

# ---- 2: Linux's ACKs lost, snd_nxt < snd_max ---------------------------------------------
nsx nft -f - <<EOF || tb_fail "cannot load the nftables rule"
table inet wharf_abort {
	chain out {
		type filter hook output priority 0;
		oifname "$IF" tcp sport $PORT2 tcp flags & (syn | rst) == 0 counter drop
	}
}
EOF
abort_step 2 $PORT2
dropped=$(nsx nft list table inet wharf_abort | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
echo "step 2: nftables dropped ${dropped:-?} of Linux's ACKs"
check_reset 2 "ACKs lost, snd_nxt rewound" || fail=1
rw2=$(counter 2 tl_conn rewound); rto2=$(counter 2 tl_tcp rto)
[ "${rw2:-0}" -gt 0 ] && [ "${rto2:-0}" -gt 0 ] && [ "${dropped:-0}" -gt 0 ] \
	&& tb_pass "step 2: the RST left with snd_nxt $rw2 bytes below snd_max after $rto2 timeouts ($dropped ACKs dropped)" \
	|| { tb_log "FAIL: step 2: not the case under test: rewound ${rw2:-?}, rto ${rto2:-?}, ACKs dropped ${dropped:-?}"; fail=1; }
[ $fail -eq 0 ] || exit 1
