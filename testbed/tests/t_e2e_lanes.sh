#!/usr/bin/env bash
# A PS serving on two lanes (NETWORK_PS_CORE_NUMBER=2: two network lcores, each with its own
# TCP-lite stack and the shards it owns) and two shard-aware workers of two lanes each
# (NETWORK_WORKER_CORE_NUMBER=2: the connection to PS lane k on worker lane k), over the
# switch: every key must be served by the lane that owns it (the PS's data_ops_remote stays
# 0), both lanes of the PS and of each worker must carry requests, and the model must learn —
# the dense softmax in sync, async and GEO, and the sparse CTR model (whose keys spread over
# both lanes). Then the same on kernel TCP (two epoll threads a node), and the exactly-once
# ledger through a SIGKILL of a two-lane PS with its write-ahead log (one log per lane,
# replayed merged), on both protocols.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=47790
tb_train_cluster $B # the .endpoint_map of a PS and 2 workers; each job names its --protocol
CTL=$TB_TRAIN_CTL
CL="$TB_TRAIN_CL --ps-cores 2"

# Checks a PS status dump: two lanes, no data op crossed lanes, both lanes served requests.
check_lanes() { # NAME STATUS-FILE
	local name=$1 st=$2 remote r0 r1
	grep -q "lanes 2 " "$st" || { cat "$st" >&2; tb_fail "$name: the PS does not serve on 2 lanes"; }
	remote=$(tb_stat_num "$st" "^server " data_ops_remote)
	r0=$(tb_stat_num "$st" "^lane +0 " requests)
	r1=$(tb_stat_num "$st" "^lane +1 " requests)
	[ -n "$remote" ] && [ -n "$r0" ] && [ -n "$r1" ] || { cat "$st" >&2; tb_fail "$name: status lacks the lane counters"; }
	[ "$remote" = 0 ] || { cat "$st" >&2; tb_fail "$name: $remote data ops crossed lanes on the PS"; }
	[ "$r0" -gt 0 ] && [ "$r1" -gt 0 ] || { cat "$st" >&2; tb_fail "$name: lane requests $r0 / $r1: a lane carried nothing"; }
	tb_pass "$name: 2 lanes served $r0 and $r1 requests, data ops across lanes $remote"
}

# A worker's lanes from its log (ps_net_wlanes.c says at the end what each carried): two,
# both with requests and replies, pinned or floating as WORKER_DISABLE_PIN_CORES asks.
check_wlanes() { # NAME LOG PINNING
	local name=$1 log=$2 pin=$3 k q r
	for k in 0 1; do
		q=$(grep -E "worker wlane +$k " "$log" | tail -n 1 | sed -nE 's/.* requests ([0-9]+).*/\1/p')
		r=$(grep -E "worker wlane +$k " "$log" | tail -n 1 | sed -nE 's/.* replies ([0-9]+).*/\1/p')
		[ -n "$q" ] && [ "$q" -gt 0 ] && [ "$r" -gt 0 ] || { grep -E "wlane|lane" "$log" >&2; tb_fail "$name: worker lane $k carried ${q:-no} requests"; }
		grep -E "worker wlane +$k " "$log" | tail -n 1 | grep -q " $pin" || { grep wlane "$log" >&2; tb_fail "$name: worker lane $k is not $pin"; }
	done
}

# A running DPDK PS's frames handed between its lanes (telemetry /wharf/dn/stats: each
# lane's steered_in) into hops, and what its lanes read from their own queues into frames.
ps_hops() { # NAME
	local t r s
	hops=0 frames=0
	# Both lanes in one telemetry session (a Python start each costs about half a second).
	t=$(printf '/wharf/dn/stats,0\n/wharf/dn/stats,1\n' | timeout 10 dpdk-telemetry.py -f "wharf-$TB_ID-ps-$1" 2>&1 | tr -d ' \n')
	r=$(echo "$t" | grep -oE '"rx_queue":[0-9]+' | cut -d: -f2)
	s=$(echo "$t" | grep -oE '"steered_in":[0-9]+' | cut -d: -f2)
	[ "$(echo $r | wc -w)" = 2 ] && [ "$(echo $s | wc -w)" = 2 ] || { echo "$t" >&2; tb_fail "$1: no telemetry from both PS lanes"; }
	for v in $r; do [ "$v" -gt 0 ] || tb_fail "$1: a PS lane read no frames from its queue ($r)"; frames=$((frames + v)); done
	for v in $s; do hops=$((hops + v)); done
}

# A training job: PS on cores 0-1 (two EAL lcores), workers (two lanes on two EAL lcores each)
# on the switch; KEY >= MIN. On DPDK the PS's switch port has a queue pair per lane, which the
# switch fills by RSS, as a NIC would (TB_QUEUES), and each worker's port WQ queue pairs (1:
# its lanes share one queue, and only the PS's hash decides where a connection lands): the
# workers aim each connection at its PS lane's queue (the PS's health answer gives its RSS),
# so the PS's lanes hand each other nothing but ARP (at most 16 frames).
job() { # NAME PROTO MODE KEY MIN MODEL-ARGS...
	local name=$1 proto=$2 mode=$3 key=$4 min=$5 v ps_q=1; shift 5
	[ "$proto" = dpdk ] && { ps_q=2; tb_switch 3 --queues "2,$WQ,$WQ" || tb_fail "switch"; }
	TB_QUEUES=$ps_q TB_EAL_CORE=0-1 tb_node ps-$name 0 train $CL --protocol "$proto" --mode "$mode" --role ps "$@"
	for i in 0 1; do
		TB_QUEUES=$WQ TB_EAL_CORE=0-1 tb_node w$i-$name $((i + 1)) train $CL --protocol "$proto" --mode "$mode" \
			--role worker --task-index $i --worker-cores 2 $WPIN "$@"
	done
	tb_wait_exit 120 "w0-$name" "w1-$name"
	if [ "$proto" = dpdk ]; then
		sleep 0.3 # telemetry is published every 100 ms
		ps_hops "$name"
		[ "$hops" -le 16 ] || tb_fail "$name: $hops of the PS's $frames frames were handed between its lanes"
		tb_pass "$name: the switch's RSS put the PS's $frames frames on their lanes' queues; $hops handed over"
	fi
	"$TB_BUILD/wharf-ctl" "$CTL" status >"$TB_DIR/$name-status.txt" 2>&1
	"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
	for n in w0-$name w1-$name ps-$name switch; do tb_stop "$n"; done
	for i in 0 1; do
		grep -q "\"mode\":\"$mode\"" "$TB_DIR/w$i-$name.out" || { tail -n 8 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker $i did not finish"; }
	done
	v=$(tb_json "$(ls -t "$TB_DIR/w0-$name.out" "$TB_DIR/w1-$name.out" | head -n 1)" "$key")
	[ "$(echo "$v $min" | awk '{print ($1 >= $2)}')" = 1 ] || tb_fail "$name: $key $v < $min"
	tb_pass "$name ($mode, $proto, 2-lane PS): $key $v"
	check_lanes "$name" "$TB_DIR/$name-status.txt"
	for i in 0 1; do check_wlanes "$name" "$TB_DIR/w$i-$name.log" "$WPINNED"; done
	tb_pass "$name: both lanes of each worker carried requests ($WPINNED)"
}

D="--model softmax --epochs 2 --train-limit 12000 --test-limit 2000"
WPIN="" WPINNED=floating WQ=2
job sync dpdk sync test_accuracy 0.76 $D
WPIN="--worker-disable-pin=false" WPINNED=pinned WQ=1
job async dpdk async test_accuracy 0.72 $D --tensor-fuse=true
job geo dpdk geo test_accuracy 0.78 $D --geo-k 4  # as t_e2e_modes' GEO job
job ctr dpdk async test_auc 0.70 --model lr --ctr-samples 100000 --epochs 2
WPIN="" WPINNED=floating WQ=1
job ksync kernel sync test_accuracy 0.76 $D

# More worker lanes than destinations, polling: a 1-lane PS gives each 2-lane worker one
# destination, on lane 0; lane 1, with no connection, naps instead of spinning a core. Its
# thread's CPU time stays under a tenth of the job's time (spinning, it was all of it).
idle_lane() {
	local name=idle i cpu t0 ms
	TB_EAL_CORE=0-1 tb_node ps-$name 0 psd $CL --ps-cores 1 --protocol kernel --mode async \
		--role ps --model count
	tb_wait_log "$TB_DIR/ps-$name.log" "serving" 20 || { cat "$TB_DIR/ps-$name.log" >&2; tb_fail "idle lane: ps did not start"; }
	t0=$(date +%s%N)
	for i in 0 1; do
		TB_EAL_CORE=0-1 tb_node w$i-$name $((i + 1)) train $CL --ps-cores 1 --protocol kernel \
			--mode async --role worker --task-index $i --worker-cores 2 --worker-polling \
			--model count --count-pushes 500 --count-delay-us 2000
	done
	tb_wait_exit 24 "w0-$name" "w1-$name"
	ms=$(( ($(date +%s%N) - t0) / 1000000 ))
	"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
	for i in 0 1; do tb_stop w$i-$name; done
	tb_stop ps-$name
	for i in 0 1; do
		grep -q '"exactly_once":true' "$TB_DIR/w$i-$name.out" || { tail -n 5 "$TB_DIR/w$i-$name.log" >&2; tb_fail "idle lane: worker $i's ledger"; }
		cpu=$(grep -E "worker wlane +1 " "$TB_DIR/w$i-$name.log" | tail -n 1 | sed -nE 's/.* cpu_ms ([0-9]+).*/\1/p')
		[ -n "$cpu" ] || { grep wlane "$TB_DIR/w$i-$name.log" >&2; tb_fail "idle lane: worker $i reports no lane 1 CPU time"; }
		[ "$cpu" -lt $((ms / 10)) ] || tb_fail "idle lane: worker $i's lane 1 used $cpu ms of CPU in a $ms ms job"
	done
	tb_pass "idle lane: a polling worker lane with no destination used $cpu ms of CPU in a $ms ms job"
}
idle_lane

# The ledger through a SIGKILL of a two-lane PS: both lanes' logs replayed, nothing lost or
# doubled (the count model: each push adds 1 to its worker's key). On kernel TCP lane 1's
# port is the kernel's pick, a new one after the restart: the workers learn it from health.
ledger() { # PROTO
	local proto=$1 ck=$TB_DIR/ps-$1.ckpt lcl="$CL --protocol $1 --mode async" i
	[ "$proto" = dpdk ] && { tb_switch 3 || tb_fail "switch"; }
	TB_EAL_CORE=0-1 tb_node ps1-$proto 0 psd $lcl --role ps --model count --ckpt "$ck" --ckpt-interval 1
	tb_wait_log "$TB_DIR/ps1-$proto.log" "serving" 20 || { cat "$TB_DIR/ps1-$proto.log" >&2; tb_fail "ps did not start"; }
	for i in 0 1; do
		TB_EAL_CORE=0-1 tb_node lw$i-$proto $((i + 1)) train $lcl --role worker --task-index $i \
			--model count --count-pushes "$PUSHES" --count-delay-us 2000 --worker-cores 2
	done
	sleep 2.5
	kill -KILL "${TB_PIDS[ps1-$proto]}"; wait "${TB_PIDS[ps1-$proto]}" 2>/dev/null; unset "TB_PIDS[ps1-$proto]"
	sleep 0.5
	TB_EAL_CORE=0-1 tb_node ps2-$proto 0 psd $lcl --role ps --model count --ckpt "$ck" --restore "$ck" --ckpt-interval 1
	tb_wait_log "$TB_DIR/ps2-$proto.log" "serving" 20 || { cat "$TB_DIR/ps2-$proto.log" >&2; tb_fail "ps did not restart"; }
	for _ in $(seq 1 450); do
		kill -0 "${TB_PIDS[lw0-$proto]}" 2>/dev/null || kill -0 "${TB_PIDS[lw1-$proto]}" 2>/dev/null || break
		sleep 0.2
	done
	for i in 0 1; do
		grep -q '"exactly_once":true' "$TB_DIR/lw$i-$proto.out" || { tail -n 10 "$TB_DIR/lw$i-$proto.log" "$TB_DIR/lw$i-$proto.out" "$TB_DIR/ps2-$proto.log" >&2; tb_fail "$proto: worker $i: ledger $(tb_json "$TB_DIR/lw$i-$proto.out" value 0) of $PUSHES after a SIGKILL of a 2-lane PS"; }
		grep -q "reconnected to ps 0" "$TB_DIR/lw$i-$proto.log" || tb_fail "$proto: worker $i never reconnected"
	done
	grep -m1 "restored from" "$TB_DIR/ps2-$proto.log" | sed 's/^.* wharf\.wc: wharf-psd: //' >&2
	tb_pass "ledger ($proto): $PUSHES pushes per worker counted once across a SIGKILL of a 2-lane PS"
	"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null
	for i in 0 1; do tb_stop lw$i-$proto; done
	tb_stop ps2-$proto
	tb_stop switch
}
PUSHES=1200
ledger dpdk
ledger kernel
