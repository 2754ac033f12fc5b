#!/usr/bin/env bash
# TCP-lite over net_af_xdp: the PMD a host uses when its NIC stays with the kernel (no vfio),
# here on the two ends of a veth pair that holds no kernel address (control endpoints on
# loopback). net_af_xdp states no RTE_ETH_TX_OFFLOAD_MULTI_SEGS: it sends one buffer a frame,
# so every zero-copy chain must reach it copied into one buffer. It has no Rx interrupt: a
# sleeping lcore waits in epoll on its AF_XDP socket, readable while frames wait. Shown: a
# wharf-perf echo server and a client on the pair; 64 KiB messages (each many chained
# frames) come back intact (--count, --verify), one at a time, as do 64 B ping-pongs; with
# no spin after work (WHARF_IDLE_SPIN_US=0) the client sleeps between its round trips and
# the socket wakes it (intr_wakeups, from WHARF_TL_STATS=1, at least one per two round
# trips; none when it backs off with timed sleeps instead); the server dropped no echo.
# Then a PS and a worker on the pair train the MLP in sync mode above 0.6 accuracy.
# Not a stream: 64 KiB echoes 8 in flight overrun the socket's Rx ring (1024 frames) on a
# veth, and one run in 15 to 25 ended by the retransmission limit (cause not found).
set -u
. "$(dirname "$0")/../cluster/tb.sh"
COUNT=${WHARF_AFXDP_COUNT:-1000}

tb_init
A=wx$$a B=wx$$b
veth_cleanup() {
	local rc=$? n
	for n in "${!TB_PIDS[@]}"; do tb_stop "$n"; done
	ip link del "$A" 2>/dev/null
	(exit $rc)
	tb_cleanup exit
}
trap veth_cleanup EXIT

ip link add "$A" type veth peer name "$B" 2>/dev/null ||
	{ tb_skip afxdp "cannot create a veth pair"; exit 0; }
for x in "$A" "$B"; do
	sysctl -qw "net.ipv6.conf.$x.disable_ipv6=1" 2>/dev/null
	ip link set "$x" up || tb_fail "link up"
done

xdp_eal() { # NAME CORE IFACE
	echo "-l $2 --file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args) --log-level=*:warning" \
		"--log-level=wharf.*:info --vdev=net_af_xdp0,iface=$3"
}
"$TB_BUILD/wharf-perf" $(xdp_eal srv 1 "$A") -- --ip 198.18.5.1/24 \
	--server --port 7000 --echo --seconds 60 >"$TB_DIR/srv.out" 2>"$TB_DIR/srv.log" &
TB_PIDS[srv]=$!
if ! tb_wait_log "$TB_DIR/srv.log" "server on port" 20; then
	# No AF_XDP socket here (a kernel without XDP on veth): nothing of wharf's ran.
	grep -qiE "af_xdp|xsk|bpf" "$TB_DIR/srv.log" &&
		{ tail -n 3 "$TB_DIR/srv.log" >&2; tb_skip afxdp "net_af_xdp cannot start here"; exit 0; }
	tail -n 5 "$TB_DIR/srv.log" >&2
	tb_fail "perf server did not come up"
fi
XENV=""
cli() { # NAME perf-args...   (XENV: the client's environment)
	local name=$1; shift
	timeout --kill-after=5 30 env $XENV "$TB_BUILD/wharf-perf" $(xdp_eal "$name" 0 "$B") \
		-- --ip 198.18.5.2/24 --peer 198.18.5.1 --port 7000 "$@" \
		>"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" ||
		{ tail -n 5 "$TB_DIR/$name.log" >&2; tb_fail "$name: client failed"; }
	[ "$(tb_json "$TB_DIR/$name.out" errors)" = 0 ] || tb_fail "$name: client errors"
	[ "$(tb_json "$TB_DIR/$name.out" corrupt)" = 0 ] || tb_fail "$name: corrupt echoes"
}
cli big --size 65536 --verify --count "$COUNT" --seconds 20
[ "$(tb_json "$TB_DIR/big.out" msgs)" = "$COUNT" ] ||
	tb_fail "64 KiB ping-pong: $(tb_json "$TB_DIR/big.out" msgs) echoes of $COUNT in 20 s"
tb_pass "64 KiB ping-pong over net_af_xdp: $COUNT echoes intact, p50 $(tb_json "$TB_DIR/big.out" rtt_p50_us) us"
cli small --size 64 --verify --count "$COUNT" --seconds 20
[ "$(tb_json "$TB_DIR/small.out" msgs)" = "$COUNT" ] ||
	tb_fail "64 B ping-pong: $(tb_json "$TB_DIR/small.out" msgs) echoes of $COUNT"
tb_pass "64 B ping-pong over net_af_xdp: $COUNT echoes, p50 $(tb_json "$TB_DIR/small.out" rtt_p50_us) us"
XENV="WHARF_IDLE_SPIN_US=0 WHARF_TL_STATS=1" cli asleep --size 64 --verify --count "$COUNT" --seconds 20
[ "$(tb_json "$TB_DIR/asleep.out" msgs)" = "$COUNT" ] ||
	tb_fail "64 B ping-pong, no spin: $(tb_json "$TB_DIR/asleep.out" msgs) echoes of $COUNT"
# The "dn:" line WHARF_TL_STATS=1 logs at exit.
sleeps=$(tb_stat_num "$TB_DIR/asleep.log" "wharf\.tl: dn: " sleeps)
woken=$(tb_stat_num "$TB_DIR/asleep.log" "wharf\.tl: dn: " intr_wakeups)
[ -n "$sleeps" ] && [ -n "$woken" ] || { tail -n 5 "$TB_DIR/asleep.log" >&2; tb_fail "no dn: counters"; }
[ $((woken * 2)) -ge "$COUNT" ] ||
	tb_fail "no spin: $woken of $sleeps sleeps woken by the socket over $COUNT round trips"
tb_pass "64 B ping-pong over net_af_xdp, no spin: $sleeps sleeps, $woken woken by the socket, p50 $(tb_json "$TB_DIR/asleep.out" rtt_p50_us) us"
tb_stop srv
[ "$(tb_json "$TB_DIR/srv.out" echo_dropped)" = 0 ] || tb_fail "server dropped echoes: $(cat "$TB_DIR/srv.out")"
[ "$(tb_json "$TB_DIR/srv.out" errors)" = 0 ] || tb_fail "server errors"

# Training: the PS on one end, its worker on the other.
printf '127.0.0.1:47960=198.18.5.1:6666\n127.0.0.1:47961=198.18.5.2:5555\n' >"$TB_DIR/map"
CL="--ps 127.0.0.1:47960 --workers 127.0.0.1:47961 --endpoint-map $TB_DIR/map --protocol dpdk"
"$TB_BUILD/wharf-train" $(xdp_eal ps 1 "$A") -- --role ps $CL --model mlp \
	>"$TB_DIR/ps.out" 2>"$TB_DIR/ps.log" &
TB_PIDS[ps]=$!
timeout --kill-after=5 90 "$TB_BUILD/wharf-train" $(xdp_eal w 0 "$B") -- --role worker $CL \
	--model mlp --epochs 1 --train-limit 10000 --test-limit 2000 --wait-timeout 30 \
	>"$TB_DIR/w.out" 2>"$TB_DIR/w.log" ||
	{ tail -n 8 "$TB_DIR/w.log" "$TB_DIR/ps.log" >&2; tb_fail "training: worker failed"; }
"$TB_BUILD/wharf-ctl" 127.0.0.1:47960 shutdown >/dev/null || tb_fail "training: ctl shutdown"
tb_stop ps
grep -q '"protocol":"dpdk"' "$TB_DIR/w.out" || { tail -n 5 "$TB_DIR/w.log" >&2; tb_fail "training: no result line"; }
acc=$(tb_json "$TB_DIR/w.out" test_accuracy)
[ "$(echo "$acc > 0.6" | bc)" = 1 ] || tb_fail "training: test accuracy $acc, expected > 0.6"
tb_pass "MLP over net_af_xdp: test accuracy $acc"
