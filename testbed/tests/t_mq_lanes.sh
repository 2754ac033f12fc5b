#!/usr/bin/env bash
# Lanes on multi-queue ports (docs/architecture.md, "Flow steering"): with as many queue
# pairs as lcores, each lcore reads and sends on its own queue and hands only the frames the
# device put on another lcore's queue to their owner. Three devices with two queues:
#  1. a direct virtio-user/vhost pair (queues=2 both sides): a wharf-perf echo server and a
#     client on 2 lcores each, 64 B and 256 KiB echoes (TSO and LRO on each queue), every
#     echo checked byte for byte (--verify); then the 256 KiB echoes with queues=1, each
#     side's 2 lcores sharing one queue; then queue counts that do not match the lcores
#     (queues=2 on both sides, 2 lcores against 1, either way round: echoes intact; a vhost
#     port of queues=1 under a guest of queues=2: a warning);
#  2. net_tap (two queues, the kernel's tap picks the queue): Linux's TCP as the client of a
#     2-lcore wharf-perf echo server;
#  3. the direct pair again under a training job: a 2-lane PS and a 2-lane shard-aware
#     worker, where worker lane k's connection to PS lane k rides queue k both ways;
#  4. a 2-lane PS on net_tap's two queues and two workers on Linux's TCP (protocol kernel,
#     two lanes each), which learn the PS's data address from its health answer; the tap
#     puts a connection's first segments on the queue its hash picks, and the lane that
#     claimed the port gets them handed over.
# Shown: both processes report 2 queues, every queue carried frames (rx_queue), no lcore
# relayed another's Tx (tx_handoff 0), no ring-full drops, echoes intact; the PS served
# every key on its owner lane (data_ops_remote 0) with at most 1% of its frames handed
# between lanes (telemetry /wharf/dn/stats), and the model learned.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
# Array field of the last JSON line: jarr FILE KEY -> "a b"
jarr() { grep '^{' "$1" | tail -n 1 | sed -E "s/.*\"$2\":\[([0-9,]*)\].*/\1/" | tr ',' ' '; }
all_pos() { for v in $1; do [ "$v" -gt 0 ] 2>/dev/null || return 1; done; [ -n "$1" ]; }
# A direct pair's EAL arguments with two queues and lcores 0-1.
pair2() { tb_pair_eal "$1" "$2" 0-1 2; }

# A running 2-lane PS's lanes from telemetry (slots in the order they registered): sets
# queues (the queue each reads), frames (read from them) and hops (handed in by the other).
ps_lanes_telemetry() { # NAME FILE-PREFIX
	local i t q r s
	queues="" frames=0 hops=0
	for i in 0 1; do
		t=$(echo "/wharf/dn/stats,$i" | timeout 10 dpdk-telemetry.py -f "$2" 2>&1 | tr -d ' \n')
		q=$(echo "$t" | grep -oE '"queue":[0-9]+' | cut -d: -f2)
		r=$(echo "$t" | grep -oE '"rx_queue":[0-9]+' | cut -d: -f2)
		s=$(echo "$t" | grep -oE '"steered_in":[0-9]+' | cut -d: -f2)
		[ "${r:-0}" -gt 0 ] || { echo "$t" >&2; tb_fail "$1: PS queue ${q:-none} carried no frames"; }
		queues="$queues${queues:+ }$q" frames=$((frames + r)) hops=$((hops + ${s:-0}))
	done
}

# After the PS stopped: its lanes read queues 0 and 1, each served requests, no data op
# crossed lanes (its status in STATUS), and the worker's model learned (OUT).
check_ps_lanes() { # NAME STATUS OUT
	local remote r k acc
	[ "$(echo "$queues" | tr ' ' '\n' | sort | tr '\n' ' ')" = "0 1 " ] || tb_fail "$1: PS lanes read queues '$queues', want 0 and 1"
	grep -q "lanes 2 " "$2" || { cat "$2" >&2; tb_fail "$1: the PS does not serve on 2 lanes"; }
	remote=$(grep -E "^server " "$2" | sed -nE 's/.* data_ops_remote ([0-9]+).*/\1/p')
	[ "$remote" = 0 ] || { cat "$2" >&2; tb_fail "$1: $remote data ops crossed PS lanes"; }
	for k in 0 1; do
		r=$(grep -E "^lane +$k " "$2" | sed -nE 's/.* requests ([0-9]+).*/\1/p')
		[ "${r:-0}" -gt 0 ] || { cat "$2" >&2; tb_fail "$1: PS lane $k served no requests"; }
	done
	acc=$(tb_json "$3" test_accuracy)
	[ "$(echo "$acc" | awk '{print ($1 >= 0.76)}')" = 1 ] || tb_fail "$1: test_accuracy $acc < 0.76"
}

# Checks a wharf-perf report of a 2-lcore node on a 2-queue port.
check_perf() { # NAME OUT WANT-MSGS
	local name=$1 out=$2 want=$3
	grep -q '^{' "$out" || tb_fail "$name printed no JSON"
	[ "$(tb_json "$out" queues)" = 2 ] || tb_fail "$name: $(tb_json "$out" queues) queue(s), want 2"
	[ "$(tb_json "$out" msgs)" = "$want" ] || tb_fail "$name: $(tb_json "$out" msgs) messages, want $want"
	all_pos "$(jarr "$out" rx_queue)" || tb_fail "$name: a queue carried no frames: $(jarr "$out" rx_queue)"
	all_pos "$(jarr "$out" lcore_msgs)" || tb_fail "$name: a lcore carried no messages: $(jarr "$out" lcore_msgs)"
	[ "$(jarr "$out" tx_handoff)" = "0 0" ] || tb_fail "$name: Tx handed to lcore 0: $(jarr "$out" tx_handoff)"
	[ "$(tb_json "$out" steer_drops)" = 0 ] || tb_fail "$name: ring-full drops"
}

# 1. The direct pair, wharf on both sides.
CONNS=8 COUNT=300
rm -f "$TB_DIR/pair.sock"
"$TB_BUILD/wharf-perf" $(pair2 server server) -- --ip 198.18.0.2/24 --server --port 7100 --echo \
	--lcores 2 --seconds 30 >"$TB_DIR/server.out" 2>"$TB_DIR/server.log" &
TB_PIDS[server]=$!
tb_wait_log "$TB_DIR/server.log" "server on port" 10 || { cat "$TB_DIR/server.log" >&2; tb_fail "server did not start"; }
timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" $(pair2 client client) -- --ip 198.18.0.1/24 \
	--peer 198.18.0.2 --port 7100 --lcores 2 --connections $CONNS --count $COUNT --verify \
	--seconds 20 >"$TB_DIR/client.out" 2>"$TB_DIR/client.log" || { tail -n 20 "$TB_DIR/client.log" >&2; tb_fail "pair client exited non-zero"; }
[ "$(tb_json "$TB_DIR/client.out" corrupt)" = 0 ] && [ "$(tb_json "$TB_DIR/client.out" errors)" = 0 ] || tb_fail "pair: corrupt echoes or errors"
check_perf "pair client" "$TB_DIR/client.out" $((CONNS * COUNT))
# 256 KiB echoes: segmentation offload and LRO on each queue (a queue pair per lcore keeps
# TSO on), every byte checked.
timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" $(pair2 big client) -- --ip 198.18.0.1/24 \
	--peer 198.18.0.2 --port 7100 --lcores 2 --connections 4 --count 20 --size 262144 --verify \
	--seconds 20 >"$TB_DIR/big.out" 2>"$TB_DIR/big.log" || { tail -n 20 "$TB_DIR/big.log" >&2; tb_fail "pair 256 KiB client exited non-zero"; }
tb_stop server
[ "$(tb_json "$TB_DIR/big.out" corrupt)" = 0 ] && [ "$(tb_json "$TB_DIR/big.out" errors)" = 0 ] || tb_fail "pair: corrupt 256 KiB echoes or errors"
check_perf "pair client, 256 KiB" "$TB_DIR/big.out" 80
check_perf "pair server" "$TB_DIR/server.out" $((CONNS * COUNT + 80))
tb_pass "pair, 2 queues each side: $((CONNS * COUNT)) 64 B and 80 256 KiB echoes intact; frames per queue client $(jarr "$TB_DIR/client.out" rx_queue), server $(jarr "$TB_DIR/server.out" rx_queue); handed between lcores client $(jarr "$TB_DIR/client.out" steered_in), server $(jarr "$TB_DIR/server.out" steered_in)"

# 1b. The same pair with queues=1: each side's 2 lcores share one queue, lcore 0 relaying
# lcore 1's Tx (TSO frames too) and handing it its frames (LRO chains too).
rm -f "$TB_DIR/pair.sock"
pair1() { tb_pair_eal "$1" "$2" 0-1 1; }
"$TB_BUILD/wharf-perf" $(pair1 server1 server) -- --ip 198.18.0.2/24 --server --port 7100 --echo \
	--lcores 2 --seconds 30 >"$TB_DIR/server1.out" 2>"$TB_DIR/server1.log" &
TB_PIDS[server1]=$!
tb_wait_log "$TB_DIR/server1.log" "server on port" 10 || { cat "$TB_DIR/server1.log" >&2; tb_fail "server did not start"; }
timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" $(pair1 big1 client) -- --ip 198.18.0.1/24 \
	--peer 198.18.0.2 --port 7100 --lcores 2 --connections 4 --count 20 --size 262144 --verify \
	--seconds 20 >"$TB_DIR/big1.out" 2>"$TB_DIR/big1.log" || { tail -n 20 "$TB_DIR/big1.log" >&2; tb_fail "one-queue 256 KiB client exited non-zero"; }
tb_stop server1
[ "$(tb_json "$TB_DIR/big1.out" msgs)" = 80 ] && [ "$(tb_json "$TB_DIR/big1.out" corrupt)" = 0 ] && [ "$(tb_json "$TB_DIR/big1.out" errors)" = 0 ] || tb_fail "one-queue pair: $(tb_json "$TB_DIR/big1.out" msgs) of 80 256 KiB echoes, or corrupt ones"
[ "$(tb_json "$TB_DIR/big1.out" queues)" = 1 ] || tb_fail "one-queue pair: $(tb_json "$TB_DIR/big1.out" queues) queues"
[ "$(jarr "$TB_DIR/big1.out" tx_handoff | awk '{print $2}')" -gt 0 ] || tb_fail "one-queue pair: lcore 1 handed lcore 0 no Tx"
tb_pass "pair, 1 queue each side: 80 256 KiB echoes intact, lcore 1's Tx relayed ($(jarr "$TB_DIR/big1.out" tx_handoff) frames handed to lcore 0)"

# 1c. Queue counts that do not match the lcores: a side with fewer lcores than its device's
# queues sends on queue 0 and reads them all (lcore 0), so its peer may use every queue; a
# vhost port of fewer queues than its guest cannot read the others and says so.
mismatch() { # NAME SERVER-QUEUES SERVER-LCORES CLIENT-QUEUES CLIENT-LCORES
	local n=$1
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-perf" $(tb_pair_eal "$n-s" server 0-1 "$2") -- --ip 198.18.0.2/24 --server \
		--port 7100 --echo --lcores "$3" --seconds 30 >"$TB_DIR/$n-s.out" 2>"$TB_DIR/$n-s.log" &
	TB_PIDS[$n]=$!
	tb_wait_log "$TB_DIR/$n-s.log" "server on port" 10 || { cat "$TB_DIR/$n-s.log" >&2; tb_fail "$n: server did not start"; }
	timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" $(tb_pair_eal "$n-c" client 0-1 "$4") -- \
		--ip 198.18.0.1/24 --peer 198.18.0.2 --port 7100 --lcores "$5" --connections 8 \
		--count 50 --verify --seconds 20 >"$TB_DIR/$n-c.out" 2>"$TB_DIR/$n-c.log"
	MM_RC=$?
	tb_stop "$n"
}
# The client of mismatch NAME exited 0 with its 400 echoes intact; else fails saying WHAT.
mm_intact() { # NAME WHAT
	local out=$TB_DIR/$1-c.out
	[ "$MM_RC" = 0 ] && [ "$(tb_json "$out" msgs)" = 400 ] && [ "$(tb_json "$out" corrupt)" = 0 ] || { tail -n 5 "$TB_DIR/$1-c.log" >&2; tb_fail "$2: $(tb_json "$out" msgs) of 400 echoes"; }
}
mismatch mm1 2 2 2 1
mm_intact mm1 "queues=2 both sides, 2 lcores to 1"
grep -q "lcore 0 reads all 2" "$TB_DIR/mm1-c.log" || tb_fail "the 1-lcore client does not say it reads both queues"
mismatch mm2 2 1 2 2
mm_intact mm2 "queues=2 both sides, 1 lcore to 2"
all_pos "$(jarr "$TB_DIR/mm2-c.out" lcore_msgs)" || tb_fail "queues=2 both sides, 1 lcore to 2: a client lcore carried no messages"
mismatch mm3 1 1 2 2
grep -q "the virtio peer enabled its Tx queue 1, and this port has 1" "$TB_DIR/mm3-s.log" || { cat "$TB_DIR/mm3-s.log" >&2; tb_fail "a vhost port of 1 queue under a 2-queue guest said nothing"; }
tb_pass "queues=2 both sides, 2 lcores and 1: 400 echoes intact each way round; vhost queues=1 under a 2-queue guest: warned"

# 2. net_tap with two queues, Linux's TCP as the client.
IF=wmq$$
"$TB_BUILD/wharf-perf" -l 0-1 --file-prefix "wharf-$TB_ID-tap" --no-pci $(tb_mem_args) \
	--log-level='*:warning' --log-level='wharf.*:info' --log-level=pmd.net.tap:error \
	--vdev=net_tap0,iface=$IF -- --ip 198.18.78.2/24 --server --port 7100 --echo --lcores 2 \
	--seconds 30 >"$TB_DIR/tap.out" 2>"$TB_DIR/tap.log" &
TB_PIDS[tap]=$!
for _ in $(seq 1 50); do ip link show "$IF" >/dev/null 2>&1 && break; sleep 0.1; done
ip addr add 198.18.78.1/24 dev "$IF" && ip link set "$IF" up || { cat "$TB_DIR/tap.log" >&2; tb_fail "cannot configure $IF"; }
tb_wait_log "$TB_DIR/tap.log" "server on port" 10 || { cat "$TB_DIR/tap.log" >&2; tb_fail "tap server did not start"; }
timeout --kill-after=5 30 "$TB_BUILD/wharf-perf" -- --protocol kernel --peer 198.18.78.2 --port 7100 \
	--connections $CONNS --count $COUNT --verify --seconds 20 >"$TB_DIR/linux.out" 2>"$TB_DIR/linux.log" || { tail -n 20 "$TB_DIR/linux.log" >&2; tb_fail "Linux client exited non-zero"; }
tb_stop tap
[ "$(tb_json "$TB_DIR/linux.out" msgs)" = $((CONNS * COUNT)) ] && [ "$(tb_json "$TB_DIR/linux.out" corrupt)" = 0 ] || tb_fail "tap: Linux got $(tb_json "$TB_DIR/linux.out" msgs) echoes of $((CONNS * COUNT)), or corrupt ones"
check_perf "tap server" "$TB_DIR/tap.out" $((CONNS * COUNT))
tb_pass "net_tap, 2 queues: Linux's $((CONNS * COUNT)) echoes intact; frames per queue $(jarr "$TB_DIR/tap.out" rx_queue), handed between lcores $(jarr "$TB_DIR/tap.out" steered_in)"

# 3. A 2-lane PS and a 2-lane worker training over the 2-queue pair.
B=47830
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:%d=198.19.0.1:6666\n127.0.0.1:%d=198.19.0.2:5555\n' $B $((B + 1)) >"$MAP"
CTL=127.0.0.1:$B
CL="--ps $CTL --workers 127.0.0.1:$((B + 1)) --endpoint-map $MAP --wait-timeout 30 --retry-interval 1 --ps-cores 2 --worker-cores 2 --mode sync"
rm -f "$TB_DIR/pair.sock"
"$TB_BUILD/wharf-train" $(pair2 ps server) -- $CL --role ps --model softmax >"$TB_DIR/ps.out" 2>"$TB_DIR/ps.log" &
TB_PIDS[ps]=$!
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "ps did not start"; }
timeout --kill-after=5 150 "$TB_BUILD/wharf-train" $(pair2 w0 client) -- $CL --role worker --task-index 0 \
	--model softmax --epochs 2 --train-limit 12000 --test-limit 2000 >"$TB_DIR/w0.out" 2>"$TB_DIR/w0.log" || { tail -n 20 "$TB_DIR/w0.log" >&2; tb_fail "worker exited non-zero"; }
"$TB_BUILD/wharf-ctl" "$CTL" status >"$TB_DIR/status.txt" 2>&1
ps_lanes_telemetry pair "wharf-$TB_ID-ps"
"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
tb_stop ps
check_ps_lanes pair "$TB_DIR/status.txt" "$TB_DIR/w0.out"
[ $((hops * 100)) -le "$frames" ] || tb_fail "PS: $hops of $frames frames handed between lanes (more than 1%)"
tb_pass "2-lane PS and worker on 2-queue ports: test_accuracy $(tb_json "$TB_DIR/w0.out" test_accuracy), data ops across lanes 0, PS frames $frames with $hops handed between lanes"

# 4. A 2-lane PS on net_tap's two queues, two workers on Linux's TCP.
IF=wmqp$$ B=47840
printf '127.0.0.1:%d=198.18.79.2:6666\n127.0.0.1:%d=198.18.79.1:5555\n127.0.0.1:%d=198.18.79.1:5556\n' \
	$B $((B + 1)) $((B + 2)) >"$MAP"
CTL=127.0.0.1:$B
CL="--ps $CTL --workers 127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2)) --endpoint-map $MAP --wait-timeout 30 --retry-interval 1 --ps-cores 2 --worker-cores 2 --mode sync"
"$TB_BUILD/wharf-train" -l 0-1 --file-prefix "wharf-$TB_ID-tps" --no-pci $(tb_mem_args) \
	--log-level='*:warning' --log-level='wharf.*:info' --log-level='pmd.net.tap:critical' \
	--vdev=net_tap0,iface=$IF -- $CL --role ps --model softmax >"$TB_DIR/tps.out" 2>"$TB_DIR/tps.log" &
TB_PIDS[tps]=$!
for _ in $(seq 1 50); do ip link show "$IF" >/dev/null 2>&1 && break; sleep 0.1; done
ip addr add 198.18.79.1/24 dev "$IF" && ip link set "$IF" up || { cat "$TB_DIR/tps.log" >&2; tb_fail "cannot configure $IF"; }
for i in 0 1; do
	timeout --kill-after=5 150 "$TB_BUILD/wharf-train" -- $CL --protocol kernel --role worker \
		--task-index $i --model softmax --epochs 2 --train-limit 12000 --test-limit 2000 \
		>"$TB_DIR/kw$i.out" 2>"$TB_DIR/kw$i.log" &
	TB_PIDS[kw$i]=$!
done
for i in 0 1; do
	wait "${TB_PIDS[kw$i]}" || { tail -n 20 "$TB_DIR/kw$i.log" "$TB_DIR/tps.log" >&2; tb_fail "Linux worker $i exited non-zero"; }
	unset "TB_PIDS[kw$i]"
done
"$TB_BUILD/wharf-ctl" "$CTL" status >"$TB_DIR/tstatus.txt" 2>&1
ps_lanes_telemetry tap "wharf-$TB_ID-tps"
"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
tb_stop tps
grep -q "data address 198.18.79.2:6666 (from its health answer)" "$TB_DIR/kw0.log" || tb_fail "the Linux worker did not take the PS's data address from its health answer"
check_ps_lanes tap "$TB_DIR/tstatus.txt" "$TB_DIR/kw0.out"
tb_pass "2-lane PS on net_tap's 2 queues, 2 Linux workers of 2 lanes: test_accuracy $(tb_json "$TB_DIR/kw0.out" test_accuracy), data ops across lanes 0, $hops of $frames frames handed between lanes"
