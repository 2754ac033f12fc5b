# hs.sh — the shell half of the hostile-traffic tests, sourced by testbed/tests/t_hostile_*.sh
# after testbed/cluster/tb.sh.
#
#   hs_up NET PORT        persistent TAP (own name), Linux at NET.1/24, a wharf echo server
#                         (wharf-perf --server --echo, WHARF_TL_STATS=1, plus HS_NODE_ARGS) at
#                         NET.2 on it
#   hs_run PHASE [args..] testbed/hostile/hostile.py PHASE against that node (bounded)
#   hs_mem LABEL          node RSS (/proc) and DPDK heap/ethdev counters (telemetry), printed
#   hs_down               SIGTERM the node (it prints its counters), check it exited by itself
#   hs_check              counters printed at exit vs what the phase sent (hostile.py check)
#
# Everything is torn down on exit (node, TAP, runtime dir) even when the test fails; every
# packet stays on the TAP, inside 198.18.0.0/15.
HS_PY=/usr/bin/python3
HS_DIR=$TB_ROOT/testbed/hostile
HS_NODE_SECS=${HS_NODE_SECS:-170}

hs_cleanup() {
	local rc=$?
	tb_stop cap
	tb_stop node
	[ -n "${HS_IF:-}" ] && ip link del "$HS_IF" 2>/dev/null
	(exit $rc)
	tb_cleanup exit
}

hs_up() { # NET PORT
	HS_NET=$1; HS_PORT=$2
	HS_LNX=$HS_NET.1; HS_WH=$HS_NET.2
	HS_IF=$(printf "whs%s" "${TB_ID: -6}"); [ ${#TB_ID} -lt 6 ] && HS_IF=whs$TB_ID
	trap hs_cleanup EXIT
	trap 'exit 130' INT TERM
	ip tuntap add dev "$HS_IF" mode tap multi_queue || tb_fail "cannot create TAP $HS_IF"
	ip addr add "$HS_LNX/24" dev "$HS_IF" && ip link set "$HS_IF" up || tb_fail "cannot configure $HS_IF"
	HS_PREFIX=wharf-$TB_ID-node
	WHARF_TL_STATS=1 "$TB_BUILD/wharf-perf" -l 0 --file-prefix "$HS_PREFIX" --no-pci \
		$(tb_mem_args) --log-level='*:warning' --log-level='wharf.*:info' --log-level=pmd.net.tap:error \
		--vdev=net_tap0,iface="$HS_IF" -- --ip "$HS_WH/24" --port "$HS_PORT" --server --echo \
		--seconds "$HS_NODE_SECS" ${HS_NODE_ARGS:-} >"$TB_DIR/node.out" 2>"$TB_DIR/node.log" &
	TB_PIDS[node]=$!
	HS_PID=$!
	tb_wait_log "$TB_DIR/node.log" "server on port" 20 || { cat "$TB_DIR/node.log"; tb_fail "wharf node did not come up"; }
	ping -c 1 -W 5 -I "$HS_IF" "$HS_WH" >/dev/null || tb_fail "wharf node does not answer ping on $HS_IF"
	tb_log "node pid $HS_PID on $HS_IF ($HS_WH:$HS_PORT), Linux $HS_LNX"
	if [ -n "${HS_CAPTURE:-}" ]; then
		# A capture of the test's TCP port for post-mortems (kept with the logs on failure).
		dumpcap -q -i "$HS_IF" -B 64 -f "tcp port $HS_PORT" -w "$TB_DIR/cap.pcapng" \
			>"$TB_DIR/cap.log" 2>&1 &
		TB_PIDS[cap]=$!
		tb_wait_log "$TB_DIR/cap.log" "Capturing on" 10 || tb_log "dumpcap did not start"
	fi
}

hs_run() { # PHASE [args..]
	local phase=$1; shift
	timeout --kill-after=5 "${HS_PHASE_SECS:-120}" $HS_PY "$HS_DIR/hostile.py" "$phase" \
		--iface "$HS_IF" --lnx "$HS_LNX" --wh "$HS_WH" --port "$HS_PORT" \
		--node-pid "$HS_PID" --expect "$TB_DIR/expect.json" "$@"
}

hs_tel() { # COMMAND...
	printf '%s\n' "$@" | timeout 10 dpdk-telemetry.py -f "$HS_PREFIX" 2>/dev/null | grep '^{'
}

hs_mem() { # LABEL
	local rss
	kill -0 "$HS_PID" 2>/dev/null || { tb_log "node is gone at '$1'"; return 1; }
	rss=$(awk '/^VmRSS|^VmHWM/ { printf "%s %s kB  ", $1, $2 }' /proc/"$HS_PID"/status)
	echo "mem[$1]: $rss"
	hs_tel /eal/heap_info,0 /ethdev/stats,0 | sed -E "s/^/mem[$1]: /; s/, \"q_[a-z]+\": \[[0-9, ]*\]//g"
}

hs_rss_kb() { awk '/^VmRSS/ { print $2 }' /proc/"$HS_PID"/status 2>/dev/null; }

hs_down() {
	local pid=$HS_PID
	kill -0 "$pid" 2>/dev/null || { tb_log "FAIL: the wharf node died"; tail -n 20 "$TB_DIR/node.log"; return 1; }
	kill -TERM "$pid"
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		tb_log "FAIL: the wharf node did not exit 10 s after SIGTERM (hung)"
		return 1
	fi
	wait "$pid"; local rc=$?
	unset "TB_PIDS[node]"
	cat "$TB_DIR/node.out"
	grep -E '^(\S+ [A-Z]+ wharf\.[a-z]+: )?(tl_tcp|dn|tl_conn|wharf-perf)' "$TB_DIR/node.log" | grep -v "server on port"
	[ $rc -eq 0 ] || { tb_log "FAIL: the wharf node exited with status $rc"; return 1; }
}

hs_check() {
	$HS_PY "$HS_DIR/hostile.py" check --expect "$TB_DIR/expect.json" --log "$TB_DIR/node.log"
}

# The whole test: node up, phase, memory before/after, node down, counters, verdicts.
#   hs_test PHASE NET PORT RSS_SLACK_KB [phase args..]
hs_test() {
	local phase=$1 net=$2 port=$3 slack=$4; shift 4
	local prc drc crc rss0 rss1 fail=0
	hs_up "$net" "$port"
	hs_mem before
	rss0=$(hs_rss_kb)
	hs_run "$phase" "$@" | tee "$TB_DIR/phase.out"
	prc=${PIPESTATUS[0]}
	hs_mem after
	rss1=$(hs_rss_kb)
	ping -c 3 -i 0.2 -W 2 -I "$HS_IF" "$HS_WH" >"$TB_DIR/ping.out" 2>&1 \
		&& tb_pass "node answers ping after the phase" \
		|| { tb_log "FAIL: node does not answer ping after the phase: $(tail -n 2 "$TB_DIR/ping.out" | head -n 1)"; fail=1; }
	hs_down; drc=$?
	hs_check; crc=$?
	[ $prc -eq 0 ] && tb_pass "$phase: live connection intact (SHA-256 of the echo), node answered as expected" \
		|| { tb_log "FAIL: $phase (rc $prc): $(grep -o '"failures": \[[^]]*\]' "$TB_DIR/phase.out" | cut -c1-600)"; fail=1; }
	[ $drc -eq 0 ] && tb_pass "node up to the end, clean exit on SIGTERM" || fail=1
	[ $crc -eq 0 ] && tb_pass "node counters account for what was sent" || { tb_log "FAIL: counters"; fail=1; }
	if [ -n "$rss0" ] && [ -n "$rss1" ] && [ $((rss1 - rss0)) -le "$slack" ]; then
		tb_pass "RSS bounded: $rss0 -> $rss1 kB (slack $slack kB)"
	else
		tb_log "FAIL: RSS $rss0 -> $rss1 kB (slack $slack kB)"; fail=1
	fi
	return $fail
}
