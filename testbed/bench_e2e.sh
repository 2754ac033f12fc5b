#!/usr/bin/env bash
# bench_e2e.sh OUT_DIR — the PS and training parts of `make bench`, side by side in one run
# (called by testbed/bench.sh; runnable alone). Writes:
#
#   OUT_DIR/ps.json     wharf-ps-bench: PS pull and push keys/s and p50/p99 per request of
#                       BATCH keys (Zipf over 10^7 ids, sparse dim 16, SGD, async), 1 PS with 1
#                       and 2 workers, DPDK (switch, virtio-user) vs kernel (loopback) and vs
#                       kernel over a Linux bridge (each node in a network namespace of its own,
#                       veth to the bridge: kernel TCP between containers or hosts). Top level:
#                       ps_keys_per_s_ratio_dpdk_over_kernel = geometric mean of the four
#                       dpdk/kernel keys/s ratios (pull and push, 1 and 2 workers), and
#                       ps_keys_per_s_ratio_dpdk_over_kernel_bridge the same against the bridge.
#   OUT_DIR/ps_direct.json  the same PS bench with no switch, as on NIC hosts where each node
#                       has the wire to itself: 1 PS on net_vhost0 (core 1), 1 worker on
#                       virtio_user0 attached to it (core 0), both sleeping and both polling
#                       ({PS,WORKER}_ENABLE_POLLING=True; the kernel backend then spins in
#                       epoll_wait(0)), DPDK vs kernel (loopback, and the bridge) with the same
#                       pinning. Top level: ps_direct_keys_per_s_ratio_dpdk_over_kernel[_bridge]_
#                       {sleeping,polling} = geometric mean of the pull and push keys/s ratios.
#   OUT_DIR/ps_bytes.json  PS bytes: 1 PS and 1 worker, both polling, the PS on core 1 and
#                       the worker on core 0, a sweep of timed phases (BENCH_PS_BYTES_SECONDS
#                       each): sparse (Zipf over 10^4 ids) and dense tables of dim 1024, 64 KiB
#                       and 1 MiB requests (16 and 256 rows), 1 and 8 in flight, pull, push and
#                       push-pull; goodput (Gbit/s of values) and p50/p99. Four runs: the direct
#                       pair with the PS on the vhost side and with it on the virtio side (so
#                       the copy's owner shows), the kernel over loopback and over the bridge.
#                       Top level: ps_bytes_ratio_dpdk_over_kernel_{loopback,bridge} (PS on the
#                       vhost side) and ps_bytes_ratio_ps_virtio_over_ps_vhost, geometric means
#                       over the phases; "phases" has every phase's figures per run.
#   OUT_DIR/ps_lanes.json  the PS serving on 1 and on 2 lanes (--ps-cores; DPDK: EAL -l 0-1),
#                       2 workers over the switch, DPDK and kernel, all sleeping: keys/s and
#                       keys per PS CPU-second (utime+stime of the PS over the timed phases).
#                       Top level: ps_lanes_keys_per_s_ratio_2_over_1_{dpdk,kernel} and
#                       ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{1,2}lane.
#   OUT_DIR/ps_direct_lanes.json  1 PS and 1 worker of 2 lanes each over the direct pair,
#                       all sleeping, every process on cores 0-1: a queue pair per lane
#                       (queues=2), one shared queue (queues=1, software steering), and the
#                       kernel over loopback. Top level: ps_direct_lanes_keys_per_s_ratio_
#                       {queue_each_over_shared,dpdk_over_kernel} (geometric means of pull and push).
#   OUT_DIR/train.json  wharf-train: a short Fashion-MNIST MLP sync run, 1 PS + 2 workers, as
#                       testbed/demo.sh runs it, DPDK vs kernel and --tensor-fuse off vs on,
#                       and with fusion off the kernel over the bridge too (the DPDK side pays
#                       the testbed switch's copies on the workers' cores; the bridge makes the
#                       kernel pay a hop as well). Top level: train_samples_ratio_dpdk_over_kernel
#                       (fusion off), train_samples_ratio_dpdk_over_kernel_bridge and
#                       train_samples_ratio_fuse_on_over_off (DPDK: the median of
#                       BENCH_TRAIN_FUSE_REPS rounds), plus the other pairings.
#   OUT_DIR/train_direct.json  the same MLP job with 1 worker over the direct pair (no switch:
#                       only the two nodes touch the frames, as with a NIC), both sleeping,
#                       then both polling (the kernel backend spinning on epoll_wait), PS
#                       core 1, worker core 0, against the kernel over loopback and the
#                       bridge pinned alike. Top level: train_direct_samples_ratio_dpdk_over_
#                       kernel[_bridge][_polling].
#   OUT_DIR/train_fuse.json  wharf-train's deep MLP (--layers 24 --hidden 16: 50 tensors of
#                       1 KiB or less but one, each a dense table of its own, so a step pulls
#                       and pushes 100 small tensors), sync, 1 PS + 2 workers, --tensor-fuse off
#                       vs on, DPDK and kernel, BENCH_TRAIN_EPOCHS each, BENCH_TRAIN_FUSE_REPS
#                       (3) rounds interleaved (off, on, per protocol, per round). Top level,
#                       medians over the rounds: train_fuse_samples_ratio_fuse_on_over_off (DPDK)
#                       and _kernel; train_fuse_step_us_dpdk and _kernel: where a step's time
#                       goes (the workers' pull_us, compute_us, push_us, barrier_us).
#   OUT_DIR/train_fuse_direct.json  the same deep MLP over the direct pair (1 PS, 1 worker, no
#                       switch, both sleeping, pinned alike), fusion off vs on in each round:
#                       train_fuse_direct_samples_ratio_fuse_on_over_off (DPDK) and _kernel,
#                       train_fuse_direct_step_us_dpdk and _kernel.
#   OUT_DIR/train_torch.json  the same job as a PyTorch program (python/examples/mlp_fmnist.py
#                       on the package wharf, as `make demo` runs it): DPDK vs kernel and
#                       --tensor-fuse off vs on. Top level: train_torch_samples_ratio_* as above.
#   OUT_DIR/train_torch_direct.json  the PyTorch job over the direct pair as train_direct runs
#                       wharf-train (1 worker, both sleeping then both polling, pinned alike).
#                       Top level: train_torch_direct_samples_ratio_dpdk_over_kernel[_bridge][_polling].
#
# Every process runs where its EAL -l puts it, kernel ones too (TB_PIN: taskset to the same
# cores). Every process is non-polling in ps and train (the machine has 2 cores for switch, PS and 2
# workers), as in the demo. A run that fails is recorded as null with its reason under "notes"; the file is
# written anyway. The bridge: bridge_up below (root and iproute2; without them its runs are
# recorded as failed, with why). About 10 minutes with the defaults on 2 shared cores.
# Knobs: BENCH_MTU (DPDK data-plane MTU, 1500), BENCH_PS_SECONDS (BENCH_SECONDS or 3, per phase), BENCH_PS_BATCH (1000), BENCH_TRAIN_LIMIT (60000
# images), BENCH_TRAIN_EPOCHS (2), BENCH_PS_BYTES_SECONDS (1, per phase of ps_bytes),
# BENCH_E2E_PARTS ("ps ps_direct ps_bytes ps_lanes ps_direct_lanes train train_direct
# train_fuse train_fuse_direct train_torch train_torch_direct"),
# BENCH_TRAIN_FUSE_REPS (3), BENCH_E2E_BUDGET (800 s:
# a run that would start past it is skipped and recorded as such). PS_ENABLE_POLLING and
# WORKER_ENABLE_POLLING pass through to every node (spinning needs a core per process).
set -u
OUT_DIR=${1:?usage: bench_e2e.sh OUT_DIR}
. "$(dirname "$0")/cluster/tb.sh"
mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
PS_SECS=${BENCH_PS_SECONDS:-${BENCH_SECONDS:-3}}
PS_BATCH=${BENCH_PS_BATCH:-1000}
TR_LIMIT=${BENCH_TRAIN_LIMIT:-60000}
TR_EPOCHS=${BENCH_TRAIN_EPOCHS:-2}
PB_SECS=${BENCH_PS_BYTES_SECONDS:-1}
PARTS=${BENCH_E2E_PARTS:-ps ps_direct ps_bytes ps_lanes ps_direct_lanes train train_direct train_fuse train_fuse_direct train_torch train_torch_direct}
TF_REPS=${BENCH_TRAIN_FUSE_REPS:-3}
export TB_PIN=1
BUDGET=${BENCH_E2E_BUDGET:-800}
tb_init
RES=$TB_DIR/results
mkdir -p "$RES"

# The kernel baseline between containers or hosts: node i in network namespace bridge_ns i,
# on the end of a veth pair whose other end is a port of one Linux bridge in the root
# namespace, address 198.18.7.(i+1)/24, MTU 1500 as the DPDK side's. Made once per run
# (BR_NODES namespaces); BR_WHY says why not when it could not be.
BR_NODES=3
BR_WHY="not made"
bridge_ns() { echo "wb$TB_ID-n$1"; }
bridge_ip() { echo "198.18.7.$(($1 + 1))"; }
bridge_up() {
	local i ns br=wb${TB_ID}br log=$TB_DIR/bridge.log
	command -v ip >/dev/null || { BR_WHY="no ip command (iproute2)"; return 1; }
	(
		ip link add "$br" type bridge && ip link set "$br" up &&
		for i in $(seq 0 $((BR_NODES - 1))); do
			ns=$(bridge_ns "$i")
			ip netns add "$ns" && ip -n "$ns" link set lo up &&
				ip link add "wb${TB_ID}v$i" type veth peer name eth0 netns "$ns" &&
				ip link set "wb${TB_ID}v$i" master "$br" up &&
				ip -n "$ns" addr add "$(bridge_ip "$i")/24" dev eth0 &&
				ip -n "$ns" link set eth0 up || exit 1
		done
	) >"$log" 2>&1 || { BR_WHY="cannot make the bridge: $(tail -n 1 "$log")"; return 1; }
	# Reachable from the first namespace before any run relies on it.
	command -v ping >/dev/null || { BR_WHY=""; return 0; }
	for i in $(seq 1 $((BR_NODES - 1))); do
		ip netns exec "$(bridge_ns 0)" ping -c 1 -W 2 "$(bridge_ip "$i")" >>"$log" 2>&1 ||
			{ BR_WHY="bridge made, but $(bridge_ip "$i") does not answer ping"; return 1; }
	done
	BR_WHY=""
	tb_log "bridge $br: namespaces $(bridge_ns 0)..$(bridge_ns $((BR_NODES - 1))), 198.18.7.1-$BR_NODES"
}
bridge_down() {
	local i
	for i in $(seq 0 $((BR_NODES - 1))); do ip netns del "$(bridge_ns "$i")" 2>/dev/null; done
	ip link del "wb${TB_ID}br" 2>/dev/null
	return 0
}
# What the bridge's kernel runs went through, for the report.
bridge_how() {
	local nf
	nf=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null || echo "absent (no br_netfilter)")
	echo "each node in a network namespace, veth (MTU 1500) to one Linux bridge, 198.18.7.0/24; bridge-nf-call-iptables: $nf"
}
# The namespace of node IDX for protocol PROTO: only bridge runs have one.
node_ns() { [ "$1" = bridge ] && bridge_ns "$2"; return 0; }
trap 'rc=$?; bridge_down; (exit $rc); tb_cleanup exit' EXIT
case " $PARTS " in *" ps "*|*" ps_direct "*|*" ps_bytes "*|*" train "*|*" train_direct "*|*" train_torch "*|*" train_torch_direct "*) bridge_up || tb_log "no bridge runs: $BR_WHY" ;; esac

# Control endpoints on loopback; with protocol=dpdk the map gives each node its data address
# on the switch. PROTO bridge: kernel TCP, node i's endpoint on its bridge address. Sets CL
# (cluster flags) for PROTO, BASEPORT, NWORKERS, and CTL (the PS's control endpoint; CTL_NS:
# the namespace it is reached from, "" for the root one).
cluster() { # PROTO BASEPORT NWORKERS
	local proto=$1 base=$2 nw=$3 map=$TB_DIR/map$2 ws="" i
	CTL=127.0.0.1:$base CTL_NS=""
	if [ "$proto" = bridge ]; then
		for i in $(seq 1 "$nw"); do ws="$ws${ws:+,}$(bridge_ip "$i"):$((base + i))"; done
		CTL=$(bridge_ip 0):$base CTL_NS=$(bridge_ns 0)
		CL="--ps $CTL --workers $ws --protocol kernel --wait-timeout 40 --retry-interval 1"
		return 0
	fi
	printf '127.0.0.1:%s=198.19.0.1:6666\n' "$base" >"$map"
	for i in $(seq 1 "$nw"); do
		ws="$ws${ws:+,}127.0.0.1:$((base + i))"
		printf '127.0.0.1:%s=198.19.0.%s:5555\n' "$((base + i))" "$((i + 1))" >>"$map"
	done
	CL="--ps 127.0.0.1:$base --workers $ws --endpoint-map $map --protocol $proto --wait-timeout 40 --retry-interval 1"
	# The DPDK data-plane MTU (BENCH_MTU=9000: jumbo frames; the kernel side is loopback, 64 KiB).
	if [ "$proto" = dpdk ]; then CL="$CL --mtu ${BENCH_MTU:-1500}"; fi
}

# A worker's last JSON line into RES/NODE.json; without one, its log's last line as the reason.
result() { # NODE
	local node=$1
	grep '^{' "$TB_DIR/$node.out" 2>/dev/null | tail -n 1 >"$RES/$node.json"
	# A wharf-ps-bench worker stopped by a signal prints its finished phases: not a result.
	if grep -q '"stopped":true' "$RES/$node.json"; then
		echo '{"failed":"stopped by a signal before its phases ended"}' >"$RES/$node.json"
		return 0
	fi
	[ -s "$RES/$node.json" ] && return 0
	tb_log "$node gave no result; last lines of its log:"
	tail -n 5 "$TB_DIR/$node.log" >&2
	echo "{\"failed\":\"$(tail -n 1 "$TB_DIR/$node.log" 2>/dev/null | tr -d '"\\' | cut -c1-200)\"}" \
		>"$RES/$node.json"
}

# `wharf-ctl CTL shutdown`, from the namespace that reaches the PS.
ctl_shutdown() {
	if [ -n "$CTL_NS" ]; then
		ip netns exec "$CTL_NS" "$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null 2>&1
	else
		"$TB_BUILD/wharf-ctl" "$CTL" shutdown >/dev/null 2>&1
	fi
}

# A run that cannot start: its NWORKERS workers' results say why.
not_run() { # NAME NWORKERS WHY
	local i
	tb_log "$1: not run: $3"
	for i in $(seq 0 $(($2 - 1))); do
		echo "{\"failed\":\"$(printf '%s' "$3" | tr -d '"\\' | cut -c1-200)\"}" >"$RES/$1-w$i.json"
	done
}

# The whole script stays within BUDGET seconds: with less than MIN left, a run is skipped
# and its NWORKERS workers' results say so. True when skipped.
spent() { # NAME NWORKERS MIN
	local i
	[ $((BUDGET - SECONDS)) -lt "$3" ] || return 1
	tb_log "$1: skipped, the time budget (${BUDGET} s) is spent"
	for i in $(seq 0 $(($2 - 1))); do
		echo "{\"failed\":\"skipped: bench_e2e time budget of ${BUDGET} s spent\"}" >"$RES/$1-w$i.json"
	done
}

# utime + stime of a process, in clock ticks (empty when it is gone).
ps_cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null; }

# One node: build/wharf-CMD, or with CMD py:SCRIPT a Python program on the package wharf.
node() { # NAME IDX CMD ARGS...
	local name=$1 idx=$2 cmd=$3; shift 3
	case $cmd in
	py:*) tb_pynode "$name" "$idx" "${cmd#py:}" "$@" ;;
	*) tb_node "$name" "$idx" "$cmd" "$@" ;;
	esac
}

# Starts the nodes of one job: NAME PROTO CMD PS_ARGS -- WORKER_ARGS; the PS on port 0, worker
# i on port i+1 (a switch with nw+1 ports when dpdk). Waits for the workers (bounded).
job() { # NAME PROTO BASEPORT NWORKERS TIMEOUT CMD PS_ARGS... -- WORKER_ARGS...
	local name=$1 proto=$2 base=$3 nw=$4 to=$5 cmd=$6 i; shift 6
	local psargs=() wargs=()
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do psargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	wargs=("$@")
	cluster "$proto" "$base" "$nw"
	spent "$name" "$nw" 15 && return 1
	[ "$proto" = bridge ] && [ -n "$BR_WHY" ] && { not_run "$name" "$nw" "no bridge: $BR_WHY"; return 1; }
	local left=$((BUDGET - SECONDS))
	[ "$to" -gt "$left" ] && to=$left
	# JOB_PS_QUEUES=N: the PS's switch port has N queue pairs, filled by RSS (tb_node).
	if [ "$proto" = dpdk ]; then tb_switch $((nw + 1)) --queues "${JOB_PS_QUEUES:-1}" || return 1; fi
	TB_QUEUES=${JOB_PS_QUEUES:-1} TB_NETNS=$(node_ns "$proto" 0) TB_EAL_CORE=${JOB_PS_CORES:-} node "$name-ps" 0 "$cmd" $CL \
		--role ps "${psargs[@]}"
	# JOB_CPU_AT: the PS's CPU seconds from that Unix time to the workers' end (RES/NAME-cpu).
	if [ -n "${JOB_CPU_AT:-}" ]; then
		while [ "$(date +%s)" -lt "$JOB_CPU_AT" ]; do sleep 0.05; done
		local cpu0; cpu0=$(ps_cpu_ticks "${TB_PIDS[$name-ps]}")
	fi
	for i in $(seq 0 $((nw - 1))); do
		TB_NETNS=$(node_ns "$proto" $((i + 1))) node "$name-w$i" $((i + 1)) "$cmd" $CL \
			--role worker --task-index "$i" "${wargs[@]}"
	done
	for _ in $(seq 1 "$to"); do
		local alive=0
		for i in $(seq 0 $((nw - 1))); do kill -0 "${TB_PIDS[$name-w$i]}" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && break
		sleep 1
	done
	if [ -n "${JOB_CPU_AT:-}" ]; then
		local cpu1; cpu1=$(ps_cpu_ticks "${TB_PIDS[$name-ps]}")
		[ -n "$cpu0" ] && [ -n "$cpu1" ] &&
			echo "{\"ps_cpu_s\":$(awk -v a="$cpu0" -v b="$cpu1" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", (b - a) / hz }')}" >"$RES/$name-cpu.json"
	fi
	ctl_shutdown
	for i in $(seq 0 $((nw - 1))); do
		tb_stop "$name-w$i"
		result "$name-w$i"
	done
	tb_stop "$name-ps"
	[ "$proto" = dpdk ] && tb_stop switch
	return 0
}

part_ps() {
	local proto nw base=48100 start
	for nw in 1 2; do
		for proto in dpdk kernel bridge; do
			# Workers start their timed phases together, after DPDK start-up is done.
			start=$(( $(date +%s) + 6 ))
			tb_log "ps: $proto, $nw worker(s)"
			job "ps-$proto-$nw" "$proto" "$base" "$nw" $((2 * PS_SECS + 40)) ps-bench \
				--mode async --batch "$PS_BATCH" --ps-cores 1 -- --mode async --batch "$PS_BATCH" \
				--seconds "$PS_SECS" --start-at "$start"
			base=$((base + 10))
		done
	done
}

# 1 PS (core 1) + 1 worker (core 0), both taskset there, idle mode PAIR_POLL (True: both
# polling, else both sleeping). dpdk: the direct virtio-user/vhost pair, the PS on the SIDE
# (vhost or virtio) and the worker on the other; the vhost side starts first (virtio-user
# attaches to its socket). kernel: loopback; bridge: the PS in namespace 0, the worker in 1.
pair_run() { # NAME PROTO BASEPORT SIDE TIMEOUT PS_ARGS... -- WORKER_ARGS...
	local name=$1 proto=$2 base=$3 side=$4 to=$5 ps_eal="" w_eal="" ps_pre=() w_pre=(); shift 5
	local psargs=() wargs=() poll=${PAIR_POLL:-False}
	while [ $# -gt 0 ] && [ "$1" != "--" ]; do psargs+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	wargs=("$@")
	cluster "$proto" "$base" 1
	[ "$proto" = bridge ] && [ -n "$BR_WHY" ] && { not_run "$name" 1 "no bridge: $BR_WHY"; return 1; }
	[ "$to" -gt $((BUDGET - SECONDS)) ] && to=$((BUDGET - SECONDS))
	if [ "$proto" = dpdk ] && [ "$side" = vhost ]; then
		ps_eal=$(pair_eal "$name-ps" server 1) w_eal=$(pair_eal "$name-w0" client 0)
	elif [ "$proto" = dpdk ]; then
		ps_eal=$(pair_eal "$name-ps" client 1) w_eal=$(pair_eal "$name-w0" server 0)
	fi
	[ "$proto" = bridge ] && ps_pre=(ip netns exec "$(bridge_ns 0)") w_pre=(ip netns exec "$(bridge_ns 1)")
	rm -f "$TB_DIR/pair.sock"
	if [ "$proto" = dpdk ] && [ "$side" = virtio ]; then
		pair_worker "$name" "$to" "$w_eal" "${w_pre[@]}" -- "${wargs[@]}"
		for _ in $(seq 1 100); do [ -S "$TB_DIR/pair.sock" ] && break; sleep 0.1; done
		pair_ps "$name" "$ps_eal" "${ps_pre[@]}" -- "${psargs[@]}"
	else
		pair_ps "$name" "$ps_eal" "${ps_pre[@]}" -- "${psargs[@]}"
		tb_wait_log "$TB_DIR/$name-ps.log" "serving" 10 || sleep 1
		pair_worker "$name" "$to" "$w_eal" "${w_pre[@]}" -- "${wargs[@]}"
	fi
	wait "${TB_PIDS[$name-w0]}" 2>/dev/null
	unset "TB_PIDS[$name-w0]"
	ctl_shutdown
	tb_stop "$name-ps"
	result "$name-w0"
}
# A pair node's EAL arguments: tb_pair_eal's, on PAIR_CORES (default CORE) with PAIR_QUEUES
# queues (default 1).
pair_eal() { # NAME server|client CORE
	tb_pair_eal "$1" "$2" "${PAIR_CORES:-$3}" "${PAIR_QUEUES:-1}"
}
# The command line of a pair's node up to its flags: build/wharf-PAIR_CMD EAL --, or with
# PAIR_CMD py:SCRIPT the Python program, its EAL arguments in WHARF_EAL_ARGS (pair_env).
pair_cmd() { # EAL
	case ${PAIR_CMD:-ps-bench} in
	py:*) echo "/usr/bin/python3 -u ${PAIR_CMD#py:}" ;;
	*) echo "$TB_BUILD/wharf-${PAIR_CMD:-ps-bench} $1 --" ;;
	esac
}
pair_env() { # EAL: the environment of a pair's node
	echo "PS_ENABLE_POLLING=$poll"
	echo "WORKER_ENABLE_POLLING=$poll"
	case ${PAIR_CMD:-ps-bench} in
	py:*) echo "PYTHONPATH=$TB_BUILD/python"; echo "WHARF_EAL_ARGS=$1" ;;
	esac
}
pair_ps() { # NAME EAL PREFIX... -- ARGS...
	local name=$1 eal=$2 pre=(); shift 2
	while [ "$1" != "--" ]; do pre+=("$1"); shift; done
	shift
	local envs; mapfile -t envs < <(pair_env "$eal")
	env "${envs[@]}" "${pre[@]}" taskset -c "${PAIR_CORES:-1}" $(pair_cmd "$eal") $CL --role ps "$@" >"$TB_DIR/$name-ps.out" 2>"$TB_DIR/$name-ps.log" &
	TB_PIDS[$name-ps]=$!
}
pair_worker() { # NAME TIMEOUT EAL PREFIX... -- ARGS...
	local name=$1 to=$2 eal=$3 pre=(); shift 3
	while [ "$1" != "--" ]; do pre+=("$1"); shift; done
	shift
	local envs; mapfile -t envs < <(pair_env "$eal")
	env "${envs[@]}" timeout --kill-after=5 "$to" "${pre[@]}" taskset -c "${PAIR_CORES:-0}" $(pair_cmd "$eal") $CL --role worker --task-index 0 "$@" \
		>"$TB_DIR/$name-w0.out" 2>"$TB_DIR/$name-w0.log" &
	TB_PIDS[$name-w0]=$!
}

# 1 PS + 1 worker over a direct virtio-user/vhost pair (no switch), sleeping then polling,
# against the kernel over loopback and over the bridge; then sleeping with no spin after work
# (WHARF_IDLE_SPIN_US=0 on both), DPDK and the kernel over loopback. Each node has a core of
# its own (-l 1 and -l 0), for the kernel runs as well.
part_ps_direct() {
	local proto poll base=48300 start name spin
	for poll in False True nospin; do
		for proto in dpdk kernel bridge; do
			[ "$poll" = nospin ] && [ "$proto" = bridge ] && continue
			name=pd-$proto-$poll
			spent "$name" 1 30 && continue
			tb_log "ps_direct: $proto, polling $poll"
			start=$(( $(date +%s) + 6 ))
			spin=${WHARF_IDLE_SPIN_US:-}
			[ "$poll" = nospin ] && spin=0
			WHARF_IDLE_SPIN_US=$spin PAIR_POLL=${poll/nospin/False} pair_run "$name" "$proto" "$base" vhost $((2 * PS_SECS + 40)) \
				--mode async --ps-cores 1 --batch "$PS_BATCH" -- --mode async --batch "$PS_BATCH" \
				--seconds "$PS_SECS" --start-at "$start"
			base=$((base + 10))
		done
	done
}

# PS bytes: the sweep of ps_bytes.json's header, both polling, in four placements.
PB_ARGS=(--mode async --dim 1024 --keys 10000 --kind sparse,dense --dense-rows 4096 --batch 16,256
	--inflight 1,8 --ops pull,push,push-pull --seconds "$PB_SECS")
PB_PHASES=24
PB_RUNS="dpdk_ps_vhost dpdk_ps_virtio kernel_loopback kernel_bridge"
part_ps_bytes() {
	local run proto side base=48600 name
	for run in $PB_RUNS; do
		case $run in
		dpdk_ps_vhost) proto=dpdk side=vhost ;;
		dpdk_ps_virtio) proto=dpdk side=virtio ;;
		kernel_loopback) proto=kernel side=vhost ;;
		kernel_bridge) proto=bridge side=vhost ;;
		esac
		name=pb-$run
		spent "$name" 1 $((PB_PHASES * (PB_SECS + 1) / 2)) && continue
		tb_log "ps_bytes: $run"
		PAIR_POLL=True pair_run "$name" "$proto" "$base" "$side" $((PB_PHASES * (PB_SECS + 1) + 60)) \
			"${PB_ARGS[@]}" -- "${PB_ARGS[@]}"
		base=$((base + 10))
	done
}

# The PS on 1 and on 2 lanes (2 workers, the switch), with its CPU seconds over the phases.
part_ps_lanes() {
	local proto lanes base=48400 start cores
	for lanes in 1 2; do
		for proto in dpdk kernel; do
			cores=0; [ "$lanes" = 2 ] && cores=0-1
			start=$(( $(date +%s) + 6 ))
			tb_log "ps_lanes: $proto, $lanes lane(s)"
			JOB_PS_QUEUES=$lanes JOB_PS_CORES=$cores JOB_CPU_AT=$start job "pl-$proto-$lanes" "$proto" "$base" 2 \
				$((2 * PS_SECS + 40)) ps-bench --mode async --batch "$PS_BATCH" \
				--ps-cores "$lanes" -- --mode async --batch "$PS_BATCH" --ps-cores "$lanes" \
				--seconds "$PS_SECS" --start-at "$start"
			base=$((base + 10))
		done
	done
}

# 1 PS and 1 worker of 2 lanes each over the direct pair (the PS on the vhost side), all
# sleeping, every process on cores 0-1 (EAL -l 0-1; kernel: taskset 0-1): a queue pair per lane
# (queues=2 on both sides), one queue the lanes share by software steering (queues=1), and
# kernel TCP over loopback (two epoll threads a node).
part_ps_direct_lanes() {
	local run proto base=48700 start name
	for run in dpdk_queue_each dpdk_shared kernel; do
		name=pdl-$run
		spent "$name" 1 30 && continue
		proto=dpdk; [ "$run" = kernel ] && proto=kernel
		tb_log "ps_direct_lanes: $run"
		start=$(( $(date +%s) + 6 ))
		PAIR_CORES=0-1 PAIR_QUEUES=$([ "$run" = dpdk_queue_each ] && echo 2 || echo 1) \
			pair_run "$name" "$proto" "$base" vhost $((2 * PS_SECS + 40)) --mode async \
			--ps-cores 2 --batch "$PS_BATCH" -- --mode async --batch "$PS_BATCH" --ps-cores 2 \
			--worker-cores 2 --seconds "$PS_SECS" --start-at "$start"
		base=$((base + 10))
	done
}

train_job() { # NAME PROTO BASEPORT FUSE
	job "$1" "$2" "$3" 2 150 train --mode sync --tensor-fuse="$4" --model mlp --lr 0.1 \
		--ps-cores 1 -- --mode sync --tensor-fuse="$4" --model mlp --epochs "$TR_EPOCHS" \
		--batch 64 --lr 0.1 --train-limit "$TR_LIMIT" --test-limit 2000 --decay-epochs 0
}

part_train() {
	local proto fuse rep base=48200
	for fuse in false true; do
		for proto in dpdk kernel $([ $fuse = false ] && echo bridge); do
			tb_log "train: $proto, tensor_fuse $fuse"
			train_job "tr-$proto-$fuse" "$proto" "$base" "$fuse"
			base=$((base + 10))
		done
	done
	# Fusion off and on again, back to back, rounds 2..TF_REPS: the on/off ratio is the
	# median of the rounds' (one pair of 2-second jobs moves about as much as fusion does).
	for rep in $(seq 2 "$TF_REPS"); do
		for proto in dpdk kernel; do
			for fuse in false true; do
				tb_log "train: round $rep, $proto, tensor_fuse $fuse"
				train_job "tr-$proto-$fuse-$rep" "$proto" "$base" "$fuse"
				base=$((base + 10))
			done
		done
	done
}

# A training job over the direct pair (1 PS on core 1, 1 worker on core 0, no switch: only
# the two nodes touch the frames, as with a NIC), both sleeping then both polling, against the
# kernel over loopback and over the bridge, pinned alike. Runs PREFIX-PROTO[-poll].
direct_train() { # PART PREFIX BASEPORT PAIR_CMD PS_ARGS... -- WORKER_ARGS...
	local part=$1 prefix=$2 base=$3 cmd=$4 proto poll name; shift 4
	for poll in False True; do
		for proto in dpdk kernel bridge; do
			name=$prefix-$proto$([ $poll = True ] && echo -poll)
			spent "$name" 1 40 && continue
			tb_log "$part: $proto, polling $poll"
			PAIR_CMD=$cmd PAIR_POLL=$poll pair_run "$name" "$proto" "$base" vhost 150 "$@"
			base=$((base + 10))
		done
	done
}

# The MLP job (wharf-train) over the direct pair.
part_train_direct() {
	direct_train train_direct td 48600 train --mode sync --model mlp --lr 0.1 --ps-cores 1 -- \
		--mode sync --model mlp --epochs "$TR_EPOCHS" --batch 64 --lr 0.1 \
		--train-limit "$TR_LIMIT" --test-limit 2000 --decay-epochs 0
}

# The many-small-tensors model, fusion off and on back to back in each round, so the two
# sides of a ratio see the same load on the shared cores: PART PREFIX BASEPORT HOW, HOW
# "switch" (job: 1 PS + 2 workers on the switch) or "direct" (pair_run: 1 PS + 1 worker).
deep_mlp_rounds() {
	local part=$1 prefix=$2 base=$3 how=$4 proto fuse rep name args run PAIR_CMD=train
	for rep in $(seq 1 "$TF_REPS"); do
		for proto in dpdk kernel; do
			for fuse in false true; do
				tb_log "$part: round $rep, $proto, tensor_fuse $fuse"
				name=$prefix-$proto-$fuse-$rep
				args=(--mode sync --tensor-fuse="$fuse" --model mlp --layers 24)
				if [ "$how" = switch ]; then
					run=(job "$name" "$proto" "$base" 2 120 train)
				else
					run=(pair_run "$name" "$proto" "$base" vhost 120)
				fi
				"${run[@]}" "${args[@]}" --ps-cores 1 -- "${args[@]}" --epochs "$TR_EPOCHS" \
					--batch 64 --train-limit "$TR_LIMIT" --test-limit 2000 --decay-epochs 0
				base=$((base + 10))
			done
		done
	done
}
part_train_fuse() { deep_mlp_rounds train_fuse tf 48700 switch; }
# The same over the direct pair (no switch), both sleeping.
part_train_fuse_direct() { deep_mlp_rounds train_fuse_direct tfd 48900 direct; }

# The PyTorch job (below) over the direct pair, as train_direct runs wharf-train.
part_train_torch_direct() {
	direct_train train_torch_direct ttd 48800 "py:$TB_ROOT/python/examples/mlp_fmnist.py" \
		--mode sync --lr 0.1 --ps-cores 1 -- --mode sync --ps-cores 1 --epochs "$TR_EPOCHS" \
		--batch 64 --lr 0.1 --train-limit "$TR_LIMIT" --test-limit 2000 --decay-epochs 0
}

# The same job in PyTorch (the MLP of python/examples, sync; its PS is a Python process too).
part_train_torch() {
	local proto fuse base=48500
	for fuse in false true; do
		for proto in dpdk kernel $([ $fuse = false ] && echo bridge); do
			tb_log "train_torch: $proto, tensor_fuse $fuse"
			job "tt-$proto-$fuse" "$proto" "$base" 2 150 "py:$TB_ROOT/python/examples/mlp_fmnist.py" \
				--mode sync --tensor-fuse="$fuse" --lr 0.1 --ps-cores 1 -- --mode sync \
				--tensor-fuse="$fuse" --ps-cores 1 --epochs "$TR_EPOCHS" --batch 64 --lr 0.1 \
				--train-limit "$TR_LIMIT" --test-limit 2000 --decay-epochs 0
			base=$((base + 10))
		done
	done
}

for p in $PARTS; do
	T0=$(date +%s)
	"part_$p"
	tb_log "$p: $(( $(date +%s) - T0 )) s"
done

PYTHONPATH="$TB_ROOT/testbed" /usr/bin/python3 - "$RES" "$OUT_DIR" "$PS_SECS" "$PS_BATCH" "$TR_LIMIT" "$TR_EPOCHS" "$PARTS" \
	"$PB_SECS" "$(bridge_how)" "${BENCH_MTU:-1500}" "$PB_RUNS" "$TF_REPS" <<'EOF'
import json, math, os, sys
from bench_json import read_result
res, out, secs, batch, limit, epochs, parts, pb_secs, bridge_how, mtu, pb_runs, tf_reps = sys.argv[1:13]
parts = parts.split()
# The run names of the PS keys parts: the protocol, and the kernel over the bridge.
RUN = {"dpdk": "dpdk", "kernel": "kernel", "bridge": "kernel_bridge"}

def load(name):
    return read_result(os.path.join(res, name + ".json")) or {"failed": "no output"}

def ratio(a, b):
    return None if a is None or not b else round(a / b, 4)

notes = {}

def gmean(rs):
    """Geometric mean of the ratios, or None when any of them is missing."""
    ok = [q for q in rs if q]
    return round(math.exp(sum(math.log(q) for q in ok) / len(ok)), 4) if ok and len(ok) == len(rs) else None

def finish(name, d, prefix):
    """The notes of d's runs (names starting with prefix), then OUT/name.json and a summary line."""
    d["notes"] = {k: v for k, v in notes.items() if k.startswith(prefix)}
    with open(os.path.join(out, name + ".json"), "w") as f:
        f.write(json.dumps(d) + "\n")
    print(name + ".json:", json.dumps({k: v for k, v in d.items() if k not in ("runs", "phases")}))

def run(prefix, nw):
    ws = [load(f"{prefix}-w{i}") for i in range(nw)]
    bad = [w.get("failed", "no result") for w in ws if "failed" in w or "bench" not in w and "role" not in w]
    if bad:
        notes[prefix] = bad[0]
        return {"workers": ws, "ok": False}
    return {"workers": ws, "ok": True}

def keys_run(prefix):
    """A 1-worker PS keys run with its worker's pull and push keys/s, p50 and p99 on top."""
    r = run(prefix, 1)
    if r["ok"]:
        w = r["workers"][0]
        for op in ("pull", "push"):
            for k in ("keys_per_s", "p50_us", "p99_us"):
                r[f"{op}_{k}"] = w[f"{op}_{k}"]
    return r

if "ps" in parts:
    ps = {"bench": "ps_e2e", "dim": 16, "batch": int(batch), "key_space": 10000000, "zipf_s": 1.1,
          "seconds_per_phase": int(secs), "servers": 1, "mode": "async",
          "note": "keys/s summed over the workers; p50 the workers' mean, p99 their max; "
                  "one request of `batch` keys in flight per worker",
          "how": {"dpdk": "wharf-vswitch (core 1), PS on its port 0 (core 0), workers on ports "
                          "1, 2 (cores 1, 0), virtio-user, all sleeping when idle",
                  "kernel": "the same processes over loopback, taskset to the same cores, all "
                            "sleeping (epoll_wait)",
                  "kernel_bridge": "the same as kernel, but " + bridge_how},
          "runs": {}}
    for nw in (1, 2):
        for proto in ("dpdk", "kernel", "bridge"):
            r = run(f"ps-{proto}-{nw}", nw)
            if r["ok"]:
                ws = r["workers"]
                for op in ("pull", "push"):
                    r[f"{op}_keys_per_s"] = round(sum(w[f"{op}_keys_per_s"] for w in ws))
                    r[f"{op}_p50_us"] = round(sum(w[f"{op}_p50_us"] for w in ws) / nw, 1)
                    r[f"{op}_p99_us"] = round(max(w[f"{op}_p99_us"] for w in ws), 1)
            ps["runs"][f"{RUN[proto]}_{nw}w"] = r
    for base in ("kernel", "kernel_bridge"):
        rs, sfx = [], "" if base == "kernel" else "_bridge"
        for nw in (1, 2):
            d, k = ps["runs"][f"dpdk_{nw}w"], ps["runs"][f"{base}_{nw}w"]
            for op in ("pull", "push"):
                q = ratio(d.get(f"{op}_keys_per_s"), k.get(f"{op}_keys_per_s"))
                ps[f"{op}_keys_per_s_ratio_dpdk_over_kernel{sfx}_{nw}w"] = q
                ps[f"{op}_p99_ratio_dpdk_over_kernel{sfx}_{nw}w"] = ratio(d.get(f"{op}_p99_us"), k.get(f"{op}_p99_us"))
                rs.append(q)
        ps[f"ps_keys_per_s_ratio_dpdk_over_kernel{sfx}"] = gmean(rs)
    finish("ps", ps, "ps-")

if "ps_direct" in parts:
    pd = {"bench": "ps_direct_e2e", "dim": 16, "batch": int(batch), "key_space": 10000000,
          "zipf_s": 1.1, "seconds_per_phase": int(secs), "servers": 1, "workers": 1,
          "mode": "async",
          "note": "1 PS on net_vhost0 (core 1) and 1 worker on virtio_user0 (core 0), no switch; "
                  "kernel: the same two processes over loopback with the same cores (taskset); "
                  "kernel_bridge: the same, " + bridge_how + "; polling: PS_ENABLE_POLLING and "
                  "WORKER_ENABLE_POLLING True on every backend (the kernel's spins in "
                  "epoll_wait(0)), sleeping: both False (each spins after work before it sleeps, "
                  "the window adapted up to WHARF_IDLE_SPIN_US, 2 ms by default), "
                  "sleeping_nospin: both False and "
                  "WHARF_IDLE_SPIN_US=0",
          "runs": {}}
    for poll, mode in (("False", "sleeping"), ("True", "polling"),
                       ("nospin", "sleeping_nospin")):
        protos = ("dpdk", "kernel") if poll == "nospin" else ("dpdk", "kernel", "bridge")
        for proto in protos:
            pd["runs"][f"{RUN[proto]}_{mode}"] = keys_run(f"pd-{proto}-{poll}")
        for base in ("kernel", "kernel_bridge")[:len(protos) - 1]:
            rs, sfx = [], "" if base == "kernel" else "_bridge"
            for op in ("pull", "push"):
                d, k = pd["runs"][f"dpdk_{mode}"], pd["runs"][f"{base}_{mode}"]
                q = ratio(d.get(f"{op}_keys_per_s"), k.get(f"{op}_keys_per_s"))
                pd[f"{op}_keys_per_s_ratio_dpdk_over_kernel{sfx}_{mode}"] = q
                pd[f"{op}_p50_ratio_dpdk_over_kernel{sfx}_{mode}"] = ratio(d.get(f"{op}_p50_us"), k.get(f"{op}_p50_us"))
                rs.append(q)
            pd[f"ps_direct_keys_per_s_ratio_dpdk_over_kernel{sfx}_{mode}"] = gmean(rs)
    finish("ps_direct", pd, "pd-")

if "ps_bytes" in parts:
    how = {"dpdk_ps_vhost": "the direct pair: PS on net_vhost0 (EAL -l 1), worker on "
                            "virtio_user0 (-l 0), both polling; MTU " + mtu + ", TSO",
           "dpdk_ps_virtio": "the direct pair the other way: PS on virtio_user0 (-l 1), "
                             "worker on net_vhost0 (-l 0), both polling; MTU " + mtu + ", TSO",
           "kernel_loopback": "kernel TCP over loopback (MTU 65536), PS taskset -c 1, worker "
                              "-c 0, both polling (epoll_wait(0))",
           "kernel_bridge": "kernel TCP, " + bridge_how + "; PS taskset -c 1, worker -c 0, "
                            "both polling (epoll_wait(0))"}
    pb = {"bench": "ps_bytes_e2e", "dim": 1024, "key_space": 10000, "zipf_s": 1.1,
          "dense_rows": 4096, "seconds_per_phase": int(pb_secs), "servers": 1, "workers": 1,
          "mode": "async", "idle": "polling",
          "note": "goodput: Gbit/s of the values one request carries each way (a push-pull "
                  "carries as much back); 64 KiB = 16 rows, 1 MiB = 256 rows of dim 1024; a "
                  "dense push-pull is a dense push and a dense pull of the same rows sent back "
                  "to back; latency from issue to the last reply, with `inflight` requests "
                  "kept in flight", "how": how, "runs": {}, "phases": {}}
    runs = pb_runs.split()
    for name in runs:
        r = run(f"pb-{name}", 1)
        w = r["workers"][0]
        pb["runs"][name] = {"ok": r["ok"], "how": how[name], "result": w if not r["ok"] else
                            {k: v for k, v in w.items() if k != "phases"}}
        for ph in (w.get("phases") or []) if r["ok"] else []:
            size = ph["value_bytes"]
            size = f"{size >> 20}MiB" if size >= 1 << 20 else f"{size >> 10}KiB"
            key = f"{ph['kind']}_{ph['op'].replace('-', '_')}_{size}_if{ph['inflight']}"
            e = pb["phases"].setdefault(key, {"kind": ph["kind"], "op": ph["op"],
                                              "value_bytes": ph["value_bytes"],
                                              "inflight": ph["inflight"]})
            e[name] = {k: ph[k] for k in ("gbit_per_s", "p50_us", "p99_us", "requests",
                                          "mean_inflight")}
    g = lambda e, n: (e.get(n) or {}).get("gbit_per_s")
    pairs = (("dpdk_over_kernel_loopback", "dpdk_ps_vhost", "kernel_loopback"),
             ("dpdk_over_kernel_bridge", "dpdk_ps_vhost", "kernel_bridge"),
             ("ps_virtio_over_ps_vhost", "dpdk_ps_virtio", "dpdk_ps_vhost"))
    for label, a, b in pairs:
        rs = []
        for e in pb["phases"].values():
            e[f"ratio_{label}"] = ratio(g(e, a), g(e, b))
            rs.append(e[f"ratio_{label}"])
        pb[f"ps_bytes_ratio_{label}"] = gmean(rs)
    finish("ps_bytes", pb, "pb-")

if "ps_direct_lanes" in parts:
    how = {"dpdk_queue_each": "the direct pair with queues=2 on both sides: each of the 2 lanes "
                              "of PS (net_vhost0) and worker (virtio_user0) on a queue pair of "
                              "its own; EAL -l 0-1 and taskset 0-1 for both",
           "dpdk_shared": "the same with queues=1: each node's 2 lanes share one queue by "
                          "software steering",
           "kernel": "kernel TCP over loopback, 2 epoll threads a node, both taskset 0-1"}
    pdl = {"bench": "ps_direct_lanes_e2e", "dim": 16, "batch": int(batch), "key_space": 10000000,
           "zipf_s": 1.1, "seconds_per_phase": int(secs), "servers": 1, "workers": 1,
           "lanes": 2, "mode": "async", "idle": "sleeping", "how": how, "runs": {}}
    for name in how:
        pdl["runs"][name] = keys_run(f"pdl-{name}")
    for label, a, b in (("queue_each_over_shared", "dpdk_queue_each", "dpdk_shared"),
                        ("dpdk_over_kernel", "dpdk_queue_each", "kernel")):
        ra, rb = pdl["runs"][a], pdl["runs"][b]
        pdl[f"ps_direct_lanes_keys_per_s_ratio_{label}"] = gmean(
            [ratio(ra.get(f"{op}_keys_per_s"), rb.get(f"{op}_keys_per_s")) for op in ("pull", "push")])
    finish("ps_direct_lanes", pdl, "pdl-")

if "ps_lanes" in parts:
    pl = {"bench": "ps_lanes_e2e", "dim": 16, "batch": int(batch), "key_space": 10000000,
          "zipf_s": 1.1, "seconds_per_phase": int(secs), "servers": 1, "workers": 2,
          "mode": "async",
          "note": "1 PS on 1 or 2 lanes (DPDK: EAL -l 0 or 0-1; kernel: the same cores by "
                  "taskset), 2 workers on the switch (kernel: loopback), all sleeping; keys/s "
                  "summed over the workers and both phases' means; keys per PS CPU-second = "
                  "keys served over the timed phases / the PS's utime+stime meanwhile",
          "runs": {}}
    for lanes in (1, 2):
        for proto in ("dpdk", "kernel"):
            name = f"pl-{proto}-{lanes}"
            r = run(name, 2)
            cpu = load(f"{name}-cpu").get("ps_cpu_s")
            if r["ok"]:
                ws = r["workers"]
                for op in ("pull", "push"):
                    r[f"{op}_keys_per_s"] = round(sum(w[f"{op}_keys_per_s"] for w in ws))
                    r[f"{op}_p99_us"] = round(max(w[f"{op}_p99_us"] for w in ws), 1)
                r["keys_per_s"] = round((r["pull_keys_per_s"] + r["push_keys_per_s"]) / 2)
                r["ps_cpu_s"] = cpu
                r["keys_per_ps_cpu_s"] = (round(r["keys_per_s"] * 2 * int(secs) / cpu)
                                          if cpu else None)
            pl["runs"][f"{proto}_{lanes}lane"] = r
    g = lambda n, k: pl["runs"][n].get(k)
    for proto in ("dpdk", "kernel"):
        pl[f"ps_lanes_keys_per_s_ratio_2_over_1_{proto}"] = ratio(
            g(f"{proto}_2lane", "keys_per_s"), g(f"{proto}_1lane", "keys_per_s"))
    for lanes in (1, 2):
        pl[f"ps_keys_per_s_ratio_dpdk_over_kernel_{lanes}lane"] = ratio(
            g(f"dpdk_{lanes}lane", "keys_per_s"), g(f"kernel_{lanes}lane", "keys_per_s"))
        pl[f"ps_keys_per_cpu_s_ratio_dpdk_over_kernel_{lanes}lane"] = ratio(
            g(f"dpdk_{lanes}lane", "keys_per_ps_cpu_s"), g(f"kernel_{lanes}lane", "keys_per_ps_cpu_s"))
    finish("ps_lanes", pl, "pl-")

def train_runs(d, prefix, key, reps=1):
    """d's runs (PREFIX-PROTO-FUSE: 2 workers each; rounds 2..reps of fusion off and on:
    PREFIX-PROTO-FUSE-ROUND) and its KEY_samples_ratio_* headlines; fusion on/off is the
    median of the rounds' ratios."""
    def one(name):
        r = run(name, 2)
        if r["ok"]:
            r["samples_per_s"] = round(sum(w["samples_per_s"] for w in r["workers"]), 1)
            r["test_accuracy"] = r["workers"][0].get("test_accuracy")
        return r
    for fuse in ("false", "true"):
        for proto in ("dpdk", "kernel") + (("bridge",) if fuse == "false" else ()):
            d["runs"][f"{proto}_fuse_{'on' if fuse == 'true' else 'off'}"] = one(f"{prefix}-{proto}-{fuse}")
    g = lambda n: d["runs"][n].get("samples_per_s")
    d[f"{key}_samples_ratio_dpdk_over_kernel"] = ratio(g("dpdk_fuse_off"), g("kernel_fuse_off"))
    d[f"{key}_samples_ratio_dpdk_over_kernel_fuse_on"] = ratio(g("dpdk_fuse_on"), g("kernel_fuse_on"))
    d[f"{key}_samples_ratio_dpdk_over_kernel_bridge"] = ratio(g("dpdk_fuse_off"), g("bridge_fuse_off"))
    for proto in ("dpdk", "kernel"):
        qs = [ratio(g(f"{proto}_fuse_on"), g(f"{proto}_fuse_off"))]
        for rep in range(2, reps + 1):
            for fuse in ("false", "true"):
                d["runs"][f"{proto}_fuse_{'on' if fuse == 'true' else 'off'}_{rep}"] = \
                    one(f"{prefix}-{proto}-{fuse}-{rep}")
            qs.append(ratio(g(f"{proto}_fuse_on_{rep}"), g(f"{proto}_fuse_off_{rep}")))
        ok = sorted(q for q in qs if q)
        sfx = "" if proto == "dpdk" else "_kernel"
        d[f"{key}_samples_ratio_fuse_on_over_off{sfx}"] = (ok[len(ok) // 2]
                                                         if ok and len(ok) == len(qs) else None)
        if reps > 1:
            d[f"{key}_fuse_ratios_{proto}"] = qs

if "train" in parts:
    tr = {"bench": "train_e2e", "model": "mlp", "mode": "sync", "servers": 1, "workers": 2,
          "epochs": int(epochs), "train_limit": int(limit), "batch": 64,
          "rounds": int(tf_reps),
          "note": "samples/s summed over the 2 workers; fusion on/off: the median over the "
                  "rounds of each round's on/off (round 1: the runs NAME_fuse_on/off, then "
                  "NAME_fuse_on/off_ROUND, off and on back to back)", "runs": {}}
    train_runs(tr, "tr", "train", int(tf_reps))
    finish("train", tr, "tr-")

DIRECT_NOTE = ("1 PS on net_vhost0 (core 1) and 1 worker on virtio_user0 (core 0), no switch, "
               "both sleeping (runs NAME) or both polling (runs NAME_polling: "
               "PS_ENABLE_POLLING and WORKER_ENABLE_POLLING True on both protocols, the "
               "kernel backend spinning on epoll_wait); kernel: the same two processes over "
               "loopback with the same cores (taskset); kernel_bridge: the same, " + bridge_how)

def direct_runs(d, prefix, key):
    """d's runs over the direct pair (PREFIX-PROTO[-poll]: 1 worker) and KEY_samples_ratio_*."""
    for sfx in ("", "_polling"):
        for proto in ("dpdk", "kernel", "bridge"):
            r = run(f"{prefix}-{proto}" + ("-poll" if sfx else ""), 1)
            if r["ok"]:
                r["samples_per_s"] = r["workers"][0]["samples_per_s"]
                r["test_accuracy"] = r["workers"][0].get("test_accuracy")
            d["runs"][RUN[proto] + sfx] = r
        g = lambda n: d["runs"][n + sfx].get("samples_per_s")
        d[f"{key}_samples_ratio_dpdk_over_kernel{sfx}"] = ratio(g("dpdk"), g("kernel"))
        d[f"{key}_samples_ratio_dpdk_over_kernel_bridge{sfx}"] = ratio(g("dpdk"), g("kernel_bridge"))

if "train_direct" in parts:
    td = {"bench": "train_direct_e2e", "model": "mlp", "mode": "sync", "servers": 1,
          "workers": 1, "epochs": int(epochs), "train_limit": int(limit), "batch": 64,
          "note": DIRECT_NOTE, "runs": {}}
    direct_runs(td, "td", "train_direct")
    finish("train_direct", td, "td-")
PHASES = ("pull_us", "compute_us", "push_us", "barrier_us")

def fuse_rounds(d, key, prefix, nw):
    """The rounds of fusion off and on of a deep-MLP part (runs PREFIX-PROTO-FUSE-REP of nw
    workers) into d: the median on/off per protocol, each round's, and where a step went."""
    for proto in ("dpdk", "kernel"):
        qs, acc, steps = [], {}, {}
        for rep in range(1, int(tf_reps) + 1):
            sps = {}
            for fuse in ("false", "true"):
                r = run(f"{prefix}-{proto}-{fuse}-{rep}", nw)
                if r["ok"]:
                    ws = r["workers"]
                    r["samples_per_s"] = round(sum(w["samples_per_s"] for w in ws), 1)
                    r["test_accuracy"] = ws[0].get("test_accuracy")
                    r["fuse_subs_per_frame_out"] = (round(ws[0]["fuse_subs_out"] / ws[0]["fuse_frames_out"], 1)
                                                    if ws[0].get("fuse_frames_out") else None)
                    sps[fuse] = r["samples_per_s"]
                    acc.setdefault(fuse, []).append(r["test_accuracy"])
                    steps.setdefault(fuse, []).extend(ws)
                d["runs"][f"{proto}_fuse_{'on' if fuse == 'true' else 'off'}_{rep}"] = r
            qs.append(ratio(sps.get("true"), sps.get("false")))
        ok = sorted(q for q in qs if q)
        med = ok[len(ok) // 2] if ok and len(ok) == len(qs) else None
        sfx = "" if proto == "dpdk" else "_kernel"
        d[f"{key}_samples_ratio_fuse_on_over_off{sfx}"] = med
        d[f"{key}_ratios_{proto}"] = qs
        d[f"{key}_test_accuracy_{proto}"] = {("on" if k == "true" else "off"): v for k, v in acc.items()}
        su = {}
        for fuse, ws in steps.items():
            if not all(p in w for w in ws for p in PHASES) or not sum(w[p] for w in ws for p in PHASES):
                continue
            ph = {p[:-3]: round(sum(w[p] for w in ws) / len(ws), 1) for p in PHASES}
            ph["barriers_over_1ms"] = round(sum(w["barriers_over_1ms"] / max(w["steps"] - 1, 1)
                                                for w in ws) / len(ws), 3)
            step = ph["pull"] + ph["compute"] + ph["push"] + ph["barrier"]
            ph["pull_push_share"] = round((ph["pull"] + ph["push"]) / step, 3)
            ph["pull_push_barrier_share"] = round((ph["pull"] + ph["push"] + ph["barrier"]) / step, 3)
            su["on" if fuse == "true" else "off"] = ph
        d[f"{key}_step_us_{proto}"] = su

FUSE_NOTE = ("the deep MLP: 50 dense tables (W1 784x16, 24 of 16x16 or 16x10, 25 biases), 100 "
             "small tensors a step; samples/s summed over the workers, each timed from the end of "
             "its first step; a ratio is the median over the rounds of each round's on/off; "
             "step_us: a timed step's phases in microseconds (the mean over the workers and "
             "rounds), the share of barriers that took 1 ms or more, and the step's share spent "
             "pulling and pushing, and with the barrier")
if "train_fuse" in parts:
    tf = {"bench": "train_fuse_e2e", "model": "mlp", "layers": 24, "hidden": 16, "tensors": 50,
          "mode": "sync", "servers": 1, "workers": 2, "epochs": int(epochs), "train_limit": int(limit),
          "batch": 64, "rounds": int(tf_reps), "note": FUSE_NOTE, "runs": {}}
    fuse_rounds(tf, "train_fuse", "tf", 2)
    finish("train_fuse", tf, "tf-")
if "train_fuse_direct" in parts:
    tfd = {"bench": "train_fuse_direct_e2e", "model": "mlp", "layers": 24, "hidden": 16,
           "tensors": 50, "mode": "sync", "servers": 1, "workers": 1, "epochs": int(epochs),
           "train_limit": int(limit), "batch": 64, "rounds": int(tf_reps),
           "note": FUSE_NOTE + "; over the direct pair: 1 PS on net_vhost0 (core 1) and 1 worker "
                   "on virtio_user0 (core 0), no switch, both sleeping; kernel: the same two "
                   "processes over loopback on the same cores (taskset)",
           "runs": {}}
    fuse_rounds(tfd, "train_fuse_direct", "tfd", 1)
    finish("train_fuse_direct", tfd, "tfd-")

if "train_torch" in parts:
    tt = {"bench": "train_torch_e2e", "model": "mlp", "framework": "pytorch", "mode": "sync",
          "servers": 1, "workers": 2, "epochs": int(epochs), "train_limit": int(limit), "batch": 64,
          "note": "python/examples/mlp_fmnist.py (PyTorch) on the package wharf; samples/s "
                  "summed over the 2 workers, each timed from the end of its first step",
          "runs": {}}
    train_runs(tt, "tt", "train_torch")
    finish("train_torch", tt, "tt-")
if "train_torch_direct" in parts:
    ttd = {"bench": "train_torch_direct_e2e", "model": "mlp", "framework": "pytorch",
           "mode": "sync", "servers": 1, "workers": 1, "epochs": int(epochs),
           "train_limit": int(limit), "batch": 64,
           "note": "python/examples/mlp_fmnist.py, both nodes Python processes; " + DIRECT_NOTE,
           "runs": {}}
    direct_runs(ttd, "ttd", "train_torch_direct")
    finish("train_torch_direct", ttd, "ttd-")
EOF
