# tb.sh — the virtual cluster launcher, sourced by integration tests, the demo and benches.
#
#   . testbed/cluster/tb.sh
#   tb_init [huge|no-huge]       work dir, memory mode, teardown trap
#   tb_switch N [impairments..]  start wharf-vswitch with N vhost-user ports
#   tb_node NAME IDX CMD [app args..]   start build/wharf-CMD on switch port IDX (virtio-user)
#   tb_pynode NAME IDX SCRIPT [args..]  start a Python script of the package wharf the same way
#                                (Debian's python3, build/python, the EAL arguments as --eal)
#   tb_pair_eal NAME server|client [CORE] [QUEUES]  EAL arguments of a direct virtio-user/vhost pair
#   tb_eal NAME [IDX]            print the EAL arguments a node NAME on port IDX uses (core
#                                IDX mod nproc, or TB_EAL_CORE)
#   tb_wait_log FILE REGEX SECS  wait for a line in a log
#   tb_wait_exit SECS NAME..     wait for started processes to exit (bounded)
#   tb_train_cluster BASE; tb_train_job WAIT NAME MODE KEY MIN ARGS..  a wharf-train job
#   tb_stop NAME                 SIGTERM one process and wait for it
#   tb_json FILE KEY [DEFAULT]   a number from the last JSON line of FILE; a missing key fails
#                                the test naming it (unless DEFAULT)
#   tb_stat_num FILE REGEX NAME  the number after NAME on the first line matching REGEX
#   tb_skip WHAT WHY             a part the test cannot run here: said at once, and a test that
#                                otherwise passed exits 77 (counted as skipped, not passed)
#   tb_cleanup                   kill everything started, remove hugepage files, sockets and
#                                runtime dirs of our prefixes (runs on EXIT/INT/TERM)
#
# Every process gets its own --file-prefix (wharf-<id>-<name>), its log in $TB_DIR/<name>.log,
# and is killed at teardown even when the test fails. Memory mode: hugepages when the machine
# has them (virtio-user then needs --single-file-segments), else --no-huge (memfd), or forced
# with WHARF_MEM=huge|no-huge.

TB_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Processes of the virtual cluster share 2 cores: a peer descheduled for a few ms is not a
# lost segment. TCP-lite's datacenter RTO floor (1 ms) would fire spuriously; the testbed
# raises it (Linux's floor is 200 ms). Override by exporting it.
export WHARF_TCP_RTO_MIN_US=${WHARF_TCP_RTO_MIN_US:-10000}
TB_BUILD=${TB_BUILD:-$TB_ROOT/build}
declare -A TB_PIDS=()
TB_SKIPS=()
# tb_json fails the test from inside a command substitution by signalling the script.
trap 'exit 1' USR1

tb_log() { printf '[tb %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# The fixed loopback ports of tests, demo and bench (47000-49999: control endpoints, kernel
# data ports) are taken out of the kernel's ephemeral range, so that no connection made
# meanwhile (a client's source port) holds one a node is about to listen on: seen once as
# "cannot listen: Address already in use". Best effort: needs root, as hugepages do.
TB_PORTS=47000-49999
tb_reserve_ports() {
	local f=/proc/sys/net/ipv4/ip_local_reserved_ports cur
	[ -w "$f" ] || return 0
	cur=$(cat "$f" 2>/dev/null)
	case ",$cur," in *",$TB_PORTS,"*) return 0 ;; esac
	echo "${cur:+$cur,}$TB_PORTS" >"$f" 2>/dev/null || true
}

tb_init() {
	tb_reserve_ports
	TB_ID=${TB_ID:-$$}
	TB_DIR=$(mktemp -d "/tmp/wharf-tb-$TB_ID.XXXX")
	TB_MEM=${1:-${WHARF_MEM:-$("$TB_ROOT/testbed/hugepages.sh")}}
	TB_CORES=$(nproc)
	trap 'tb_cleanup exit' EXIT
	trap 'exit 130' INT TERM
	tb_log "dir $TB_DIR, memory mode $TB_MEM"
}

# Core for a process: spread over the machine's cores round-robin by index.
tb_core() { echo $(( ${1:-0} % TB_CORES )); }

tb_mem_args() {
	if [ "$TB_MEM" = huge ]; then
		echo "--huge-dir /dev/hugepages --single-file-segments"
	else
		echo "--no-huge -m 512"
	fi
}

tb_eal() { # NAME [IDX]
	local name=$1 idx=${2:-}
	local a="-l ${TB_EAL_CORE:-$(tb_core "${idx:-0}")} --file-prefix wharf-$TB_ID-$name --no-pci $(tb_mem_args)"
	# Quiet DPDK's own INFO chatter, but not wharf's lines (the tests read them).
	a="$a --log-level=*:warning --log-level=wharf.*:info --log-level=lib.vhost.config:error"
	if [ -n "$idx" ]; then
		a="$a --vdev=virtio_user0,path=$TB_DIR/port$idx.sock,queues=${TB_QUEUES:-1},queue_size=1024"
		a="$a,mac=02:00:00:00:00:$(printf %02x $((idx + 1)))"
	fi
	echo "$a"
}

# A direct pair, no switch: the server on net_vhost0 (core 1, or CORE), the client on
# virtio_user0 attached to it (core 0, or CORE), through $TB_DIR/pair.sock (remove it before
# the server starts; the server side must be up before the client's EAL starts). QUEUES
# (default 1): queue pairs of the vdev, on both sides alike.
tb_pair_eal() { # NAME server|client [CORE] [QUEUES]
	local a="--file-prefix wharf-$TB_ID-$1 --no-pci $(tb_mem_args) --log-level=*:warning"
	a="$a --log-level=wharf.*:info --log-level=lib.vhost.config:error"
	if [ "$2" = server ]; then
		echo "-l ${3:-1} $a --vdev=net_vhost0,iface=$TB_DIR/pair.sock,queues=${4:-1},tso=1"
	else
		echo "-l ${3:-0} $a --vdev=virtio_user0,path=$TB_DIR/pair.sock,queues=${4:-1},queue_size=1024"
	fi
}

tb_switch() { # N [switch args...]
	local n=$1; shift
	# The switch carries every frame: on the last core, away from port 0's node (a PS) and
	# the other even ports' on core 0. Pinned with them on core 0, three busy processes
	# shared one core while the other had one: the PS's 2-worker p99 was 1.5 ms (CPU
	# time slices), 0.4 ms with the switch here.
	"$TB_BUILD/wharf-vswitch" $(TB_EAL_CORE=$((TB_CORES - 1)) tb_eal switch) -- --ports "$n" --sock-dir "$TB_DIR" "$@" \
		>"$TB_DIR/switch.out" 2>"$TB_DIR/switch.log" &
	TB_PIDS[switch]=$!
	for _ in $(seq 1 100); do
		[ -S "$TB_DIR/port$((n - 1)).sock" ] && return 0
		kill -0 "${TB_PIDS[switch]}" 2>/dev/null || break
		sleep 0.1
	done
	tb_log "switch did not come up:"; cat "$TB_DIR/switch.log" >&2
	return 1
}

# TB_PIN=1: the process is also pinned with taskset to the cores its EAL -l names, so a
# node on kernel TCP (which ignores EAL's arguments) runs where its DPDK twin would.
# TB_NETNS=NS: it runs in network namespace NS (ip netns exec).
# TB_QUEUES=N (N > 1): its switch port has N queue pairs (tb_switch N --queues ..), which
# the switch fills by dpdk_net's RSS (WHARF_PORT_RSS=peer).
tb_node() { # NAME IDX CMD [app args...]
	local name=$1 idx=$2 cmd=$3 pin=(); shift 3
	[ "${TB_QUEUES:-1}" -gt 1 ] && pin=(env WHARF_PORT_RSS=peer)
	[ -n "${TB_NETNS:-}" ] && pin+=(ip netns exec "$TB_NETNS")
	[ -n "${TB_PIN:-}" ] && pin+=(taskset -c "${TB_EAL_CORE:-$(tb_core "$idx")}")
	"${pin[@]}" "$TB_BUILD/wharf-$cmd" $(tb_eal "$name" "$idx") -- "$@" \
		>"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" &
	TB_PIDS[$name]=$!
}

# A Python program on wharf (python/examples): the same core, EAL arguments (--eal) and logs.
tb_pynode() { # NAME IDX SCRIPT [args...]
	local name=$1 idx=$2 script=$3 pin=(); shift 3
	[ -n "${TB_NETNS:-}" ] && pin=(ip netns exec "$TB_NETNS")
	[ -n "${TB_PIN:-}" ] && pin+=(taskset -c "${TB_EAL_CORE:-$(tb_core "$idx")}")
	PYTHONPATH=$TB_BUILD/python${PYTHONPATH:+:$PYTHONPATH} "${pin[@]}" "${TB_PYTHON:-/usr/bin/python3}" \
		-u "$script" --eal "$(tb_eal "$name" "$idx")" "$@" >"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" &
	TB_PIDS[$name]=$!
}

# Runs a node in the foreground (bounded by SECS), output in $TB_DIR/NAME.out.
tb_run() { # NAME IDX SECS CMD [app args...]
	local name=$1 idx=$2 secs=$3 cmd=$4; shift 4
	timeout --kill-after=5 "$secs" "$TB_BUILD/wharf-$cmd" $(tb_eal "$name" "$idx") -- "$@" \
		>"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log"
}

tb_wait_log() { # FILE REGEX SECS
	local i
	for i in $(seq 1 $(( $3 * 10 ))); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

tb_stop() { # NAME
	local pid=${TB_PIDS[$1]:-}
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	# Every process stops gracefully on SIGTERM: one still there 5 s later is said, then killed.
	if kill -0 "$pid" 2>/dev/null; then
		tb_log "tb_stop: $1 still running 5 s after SIGTERM: SIGKILL"
		kill -KILL "$pid" 2>/dev/null
	fi
	wait "$pid" 2>/dev/null
	unset "TB_PIDS[$1]"
}

# tb_cleanup [exit]: "exit" when run as the EXIT trap: a test that passed but skipped a part
# then exits 77. Called by a test itself it only cleans up (the trap still runs at exit).
tb_cleanup() {
	local rc=$?
	for n in "${!TB_PIDS[@]}"; do [ "$n" != switch ] && tb_stop "$n"; done
	tb_stop switch
	rm -f /dev/hugepages/wharf-"$TB_ID"-* 2>/dev/null
	rm -rf /var/run/dpdk/wharf-"$TB_ID"-* 2>/dev/null
	if [ -n "${TB_DIR:-}" ] && [ -d "$TB_DIR" ]; then
		if [ $rc -ne 0 ] || [ -n "${TB_KEEP_LOGS:-}" ]; then
			mkdir -p "$TB_ROOT/build/test-logs"
			cp -r "$TB_DIR" "$TB_ROOT/build/test-logs/" 2>/dev/null
			tb_log "logs kept in build/test-logs/$(basename "$TB_DIR")"
		fi
		rm -rf "$TB_DIR"
	fi
	[ "${1:-}" = exit ] || return $rc
	trap - EXIT INT TERM
	if [ $rc -eq 0 ] && [ ${#TB_SKIPS[@]} -gt 0 ]; then
		tb_log "passed with ${#TB_SKIPS[@]} part(s) skipped: exit 77"
		exit 77
	fi
	return $rc
}

# Waits up to SECS for the processes started as NAMEs to have exited, every one (polled every
# 0.2 s); returns at once when none runs. Says nothing either way: the caller checks results.
tb_wait_exit() { # SECS NAME...
	local secs=$1 n alive; shift
	for _ in $(seq 1 $((secs * 5))); do
		alive=0
		for n in "$@"; do kill -0 "${TB_PIDS[$n]}" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && return 0
		sleep 0.2
	done
	return 0
}

# The .endpoint_map of a PS at 127.0.0.1:BASE and two workers at BASE+1 and BASE+2, their
# data addresses NET.1 (port 6666), NET.2 and NET.3 (5555); NET is 198.19.0 unless given.
tb_train_map() { # BASE [NET]
	local b=$1 net=${2:-198.19.0}
	TB_TRAIN_MAP=$TB_DIR/.endpoint_map
	printf "127.0.0.1:%d=$net.1:6666\n127.0.0.1:%d=$net.2:5555\n127.0.0.1:%d=$net.3:5555\n" \
		"$b" $((b + 1)) $((b + 2)) >"$TB_TRAIN_MAP"
}

# A 1 PS + 2 worker wharf-train cluster over the switch (protocol dpdk) whose control
# endpoints are 127.0.0.1:BASE..BASE+2, data addresses from an .endpoint_map in TB_DIR.
tb_train_cluster() { # BASE
	local b=$1
	tb_train_map "$b"
	TB_TRAIN_CTL=127.0.0.1:$b
	TB_TRAIN_CL="--ps 127.0.0.1:$b --workers 127.0.0.1:$((b + 1)),127.0.0.1:$((b + 2)) --endpoint-map $TB_TRAIN_MAP --protocol dpdk --wait-timeout 30 --retry-interval 1"
}

# Trains on that cluster: switch, PS and two workers; waits up to WAIT s for the workers,
# shuts everything down, and checks KEY >= MIN in the JSON of the worker that finished last.
tb_train_job() { # WAIT NAME MODE KEY MIN MODEL-ARGS...
	local wait=$1 name=$2 mode=$3 key=$4 min=$5; shift 5
	tb_switch 3 || tb_fail "switch"
	tb_node ps-$name 0 train $TB_TRAIN_CL --mode "$mode" --role ps "$@"
	for i in 0 1; do tb_node w$i-$name $((i + 1)) train $TB_TRAIN_CL --mode "$mode" --role worker --task-index $i "$@"; done
	tb_wait_exit "$wait" "w0-$name" "w1-$name"
	# TB_STATUS_OUT: where to keep the PS's `wharf-ctl status` as the job ends (its counters).
	[ -n "${TB_STATUS_OUT:-}" ] && "$TB_BUILD/wharf-ctl" "$TB_TRAIN_CTL" status >"$TB_STATUS_OUT" 2>&1
	"$TB_BUILD/wharf-ctl" "$TB_TRAIN_CTL" shutdown >/dev/null
	for n in w0-$name w1-$name ps-$name switch; do tb_stop "$n"; done
	for i in 0 1; do
		grep -q "\"mode\":\"$mode\"" "$TB_DIR/w$i-$name.out" || { tail -n 8 "$TB_DIR/w$i-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker $i did not finish"; }
	done
	# The model is judged as the worker that finished last evaluated it: its final pull came
	# after every push of both. (In async and GEO the first to finish evaluates a model the
	# other is still training; in sync both see the same one.)
	local last v
	last=$(ls -t "$TB_DIR/w0-$name.out" "$TB_DIR/w1-$name.out" | head -n 1)
	v=$(tb_json "$last" "$key")
	[ "$(echo "$v $min" | awk '{print ($1 >= $2)}')" = 1 ] || tb_fail "$name: $key $v < $min ($(basename "$last"), the last to finish)"
	tb_pass "$name ($mode, dpdk): $key $v, $(tb_json "$last" samples_per_s) samples/s per worker"
}

# A number field of the last JSON line of a file: tb_json FILE KEY [DEFAULT]. When the file has
# no JSON line, or the key is absent or not a number, the test fails naming the key and the
# file, so a renamed key cannot compare as some other string; with DEFAULT (for the message
# about a run that already failed) DEFAULT is printed instead.
tb_json() {
	local v
	v=$(grep '^{' "$1" 2>/dev/null | tail -n 1 | sed -nE "s/.*\"$2\": ?(-?[0-9][0-9.eE+-]*).*/\\1/p")
	if [ -n "$v" ]; then
		echo "$v"
	elif [ $# -ge 3 ]; then
		echo "$3"
	else
		tb_log "FAIL: no number \"$2\" in the last JSON line of $1"
		# In a command substitution exit ends only the subshell: the script's USR1 trap exits.
		[ "$BASH_SUBSHELL" -gt 0 ] && kill -USR1 $$
		exit 1
	fi
}

# The number after NAME on the first line of FILE matching LINE-REGEX (a `wharf-ctl status`
# dump: tb_stat_num F "^lane +1 " requests); empty when there is none.
tb_stat_num() { # FILE LINE-REGEX NAME
	grep -E "$2" "$1" | head -n 1 | sed -nE "s/.* $3 ([0-9]+).*/\\1/p"
}

tb_fail() { tb_log "FAIL: $*"; exit 1; }
tb_pass() { tb_log "PASS: $*"; }
tb_skip() { tb_log "SKIP: $1: $2"; TB_SKIPS+=("$1"); }
