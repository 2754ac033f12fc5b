#!/usr/bin/env bash
# DPDK's own tools on a running wharf node: dpdk-telemetry.py reads the /wharf/dn counters
# and TCP-lite's /wharf/tl counters and connections, and dpdk-dumpcap captures the node's
# traffic through rte_pdump (read back with tshark). dpdk-dumpcap is a secondary process: it
# needs shared hugepage memory, so without hugepages that part is skipped (the test then
# exits 77) while the telemetry parts, which need none, still run.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
tb_switch 2 || tb_fail switch
tb_node resp 1 ping --ip 198.18.0.2/24
tb_wait_log "$TB_DIR/resp.log" "up on port" 20 || tb_fail "node did not come up"
cap=
if [ "$TB_MEM" = huge ]; then
	timeout 20 dpdk-dumpcap --file-prefix=wharf-$TB_ID-resp -i 0 -c 20 -w "$TB_DIR/cap.pcapng" \
		>"$TB_DIR/dumpcap.log" 2>&1 &
	cap=$!
	sleep 3 # dumpcap attaches as a secondary process; its own messages come only at exit
else
	tb_skip "dpdk-dumpcap capture" "a secondary process needs shared hugepage memory; memory mode is $TB_MEM"
fi
tb_run cli 0 30 ping --ip 198.18.0.1/24 --peer 198.18.0.2 --count 20 --interval-us 5000 \
	|| tb_fail "ping failed"
if [ -n "$cap" ]; then
	wait $cap
	n=$(tshark -r "$TB_DIR/cap.pcapng" -Y icmp 2>/dev/null | wc -l)
	[ "$n" -ge 10 ] || tb_fail "dpdk-dumpcap captured $n ICMP frames"
	tb_pass "dpdk-dumpcap captured $n ICMP frames of the running node"
fi
out=$(echo "/wharf/dn/stats,0" | timeout 10 dpdk-telemetry.py -f "wharf-$TB_ID-resp" 2>&1)
echo "$out" | tail -n 1 | cut -c1-300
replies=$(echo "$out" | grep -o '"icmp_echo_replies": [0-9]*' | grep -o '[0-9]*$')
# Every reply the pinger got was counted by the responder (a frame the switch could not hand
# to a busy guest, its tx_fail, is neither: seen once under load); 20 requests and the
# pinger's ARP probe were sent.
got=$(tb_json "$TB_DIR/cli.out" received)
[ "$got" -ge 15 ] || tb_fail "the pinger got $got replies of 20"
[ "${replies:-0}" -ge "$got" ] || tb_fail "telemetry shows ${replies:-none} echo replies, the pinger got $got"
tb_pass "dpdk-telemetry.py /wharf/dn/stats: $replies echo replies (the pinger got $got of 20)"

# TCP-lite's counters of a live transport instance: a wharf-perf echo server and a client.
tb_stop resp
tb_node srv 1 perf --ip 198.18.0.2/24 --server --port 7000 --echo --seconds 60
tb_wait_log "$TB_DIR/srv.log" "server on port" 20 || tb_fail "perf server did not come up"
tb_node cli 0 perf --ip 198.18.0.1/24 --peer 198.18.0.2 --port 7000 --seconds 4
sleep 2
tl=$(printf '/wharf/tl/stats,0\n/wharf/tl/conns,0\n' | timeout 10 dpdk-telemetry.py -f "wharf-$TB_ID-srv" 2>&1)
echo "$tl" | grep wharf | cut -c1-300
segs=$(echo "$tl" | grep -o '"seg_in": [0-9]*' | grep -o '[0-9]*$')
[ "${segs:-0}" -gt 100 ] || tb_fail "telemetry /wharf/tl/stats: seg_in ${segs:-missing}"
echo "$tl" | grep -q 'state=4' || tb_fail "telemetry /wharf/tl/conns shows no established connection"
tb_pass "dpdk-telemetry.py /wharf/tl/stats ($segs segments in) and /wharf/tl/conns of a live echo server"
