#!/usr/bin/env bash
# Linux <-> wharf over a TAP device: wharf-ping runs on net_tap (no Rx interrupts there, so
# its idle loop backs off with sleeps); Linux's ping reaches it, and it reaches Linux.
set -u
. "$(dirname "$0")/../cluster/tb.sh"
tb_init
IF=wtap$$
LNX=198.18.1.1; WH=198.18.1.2
tap_eal() { echo "-l 0 --file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args) --log-level=*:warning --log-level=wharf.*:info --log-level=pmd.net.tap:error --vdev=net_tap0,iface=$IF"; }

"$TB_BUILD/wharf-ping" $(tap_eal resp) -- --ip $WH/24 >"$TB_DIR/resp.out" 2>"$TB_DIR/resp.log" &
TB_PIDS[resp]=$!
for _ in $(seq 1 50); do ip link show "$IF" >/dev/null 2>&1 && break; sleep 0.1; done
ip link show "$IF" >/dev/null 2>&1 || { cat "$TB_DIR/resp.log"; tb_fail "TAP $IF never appeared"; }
ip addr add $LNX/24 dev "$IF" && ip link set "$IF" up || tb_fail "cannot configure $IF"
tb_wait_log "$TB_DIR/resp.log" "up on port" 10 || tb_fail "wharf node did not come up"

# Linux -> wharf
out=$(ping -c 50 -i 0.02 -W 2 -I "$IF" $WH 2>&1); echo "$out" | tail -n 2
echo "$out" | grep -qE ' 50 received' || tb_fail "Linux ping to wharf lost replies"
tb_pass "Linux -> wharf: 50/50 $(echo "$out" | tail -n 1)"
tb_stop resp

# wharf -> Linux
timeout 30 "$TB_BUILD/wharf-ping" $(tap_eal client) -- --ip $WH/24 --peer $LNX --count 100 \
	--interval-us 2000 >"$TB_DIR/client.out" 2>"$TB_DIR/client.log" &
cpid=$!
for _ in $(seq 1 50); do ip link show "$IF" >/dev/null 2>&1 && break; sleep 0.1; done
ip addr add $LNX/24 dev "$IF" 2>/dev/null; ip link set "$IF" up
wait $cpid || { cat "$TB_DIR/client.log"; tb_fail "wharf-ping to Linux exited non-zero"; }
cat "$TB_DIR/client.out"
recv=$(tb_json "$TB_DIR/client.out" received)
[ "$recv" = 100 ] || tb_fail "wharf -> Linux: $recv/100 replies"
tb_pass "wharf -> Linux: 100/100, p50 $(tb_json "$TB_DIR/client.out" rtt_p50_us) us"
