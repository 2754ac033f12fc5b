#!/usr/bin/env bash
# make bench — every figure side by side in one run, reported as ratios against a baseline
# measured in the same run (these machines are shared and noisy: absolute times are not
# stable, ratios are). Writes build/bench/report.json (with its "headline"), report.md and
# PNG plots of the latency distributions.
#
# Parts (each bounded in time; a part whose tool is missing is reported as null with why):
#   pmd        raw PMD packet rate over a direct virtio-user <-> vhost-user pair (wharf-pktgen)
#   transport  wharf-perf over the same direct pair (TCP-lite, busy-polling) vs. the kernel
#              socket backend over loopback: 64 B ping-pong RTT, 64 B message rate, 1 MiB stream
#              (MTU 1500 and 9000); and the 64 B ping-pong RTT once more with both sides of
#              both stacks sleeping when idle
#   fuse       wharf-fuse-bench: fusion on vs off, DPDK (direct pair, polling) and kernel;
#              and wharf-pktgen --step: the raw PMD's floor under a fused step's bytes
#   shard      wharf-shard-bench: in-process sparse push/pull keys/s per lcore
#   e2e        PS pull/push keys/s (1 and 2 workers via the switch; 1 worker on a direct
#              pair, sleeping and polling), PS bytes (goodput of 64 KiB and 1 MiB requests
#              on the direct pair, both placements, polling) and end-to-end training
#              samples/s (wharf-train, its deep many-small-tensors MLP with fusion off vs
#              on, and the PyTorch example), DPDK vs kernel (loopback,
#              and a Linux bridge between network namespaces), fusion on vs off
#              (testbed/bench_e2e.sh)
# BENCH_SECONDS (default 3) sets the length of each timed run. BENCH_PARTS (default all:
# "pmd transport fuse shard e2e") reruns only some parts; the others' last results stay in
# build/bench and go into the report again, each figure with the time of the run that made it
# (build/bench/run_at.json). A run that fails leaves {"failed": reason} as its result: the
# report shows its figures as null with that reason.
set -u
. "$(dirname "$0")/cluster/tb.sh"
OUT=$TB_ROOT/build/bench
SECS=${BENCH_SECONDS:-3}
mkdir -p "$OUT"
PARTS=${BENCH_PARTS:-pmd transport fuse shard e2e}
FUSE_STEP_BYTES_FALLBACK=70587 # the fused 64 B step's bytes on the wire, as last measured
export BENCH_RUN_AT=$(date -u +%Y-%m-%dT%H:%M:%SZ) # this run, in run_at.json and the report
[ -n "${BENCH_PARTS:-}" ] || rm -f "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.png "$OUT"/report.md
want() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
tb_init

# failed NAME REASON: the run's result is {"failed": REASON} (said on the console too).
failed() {
	tb_log "$1: FAILED: $2"
	printf '{"failed":"%s"}\n' "$(printf '%s' "$2" | tr -d '"\\' | tr '\n\t' '  ' | cut -c1-300)" \
		>"$OUT/$1.json"
}

# Why a run failed: its exit status (124: timed out) and its log's last line.
why() { # RC LOG
	local what="exit status $1"
	[ "$1" = 124 ] && what="timed out"
	echo "$what: $(grep -v '^ *$' "$2" 2>/dev/null | tail -n 1)"
}

# result NAME RC LOG: a run that exited non-zero or printed no JSON line has failed.
result() {
	[ "$2" -eq 0 ] && grep -q '^{' "$OUT/$1.json" 2>/dev/null && return 0
	[ "$2" -eq 0 ] && { failed "$1" "no JSON result line: $(why 0 "$3")"; return 1; }
	failed "$1" "$(why "$2" "$3")"
	return 1
}

part_pmd() {
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgrx server) -- --rx --seconds "$SECS" \
		>"$OUT/pmd_rx.json" 2>"$TB_DIR/pgrx.log" &
	TB_PIDS[pgrx]=$!
	sleep 1
	timeout 60 "$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgtx client) -- --tx --seconds "$SECS" \
		>"$OUT/pmd_tx.json" 2>"$TB_DIR/pgtx.log"
	result pmd_tx $? "$TB_DIR/pgtx.log"
	wait "${TB_PIDS[pgrx]}"
	result pmd_rx $? "$TB_DIR/pgrx.log"
	unset "TB_PIDS[pgrx]"
}

# Both ends of a pair busy-poll (--poll), unless PERF_SLEEP=1: then neither has --poll and both
# sleep when idle (DPDK on Rx interrupts, the kernel backend in epoll_wait).
perf_poll() { [ "${PERF_SLEEP:-0}" = 1 ] || echo --poll; }

# perf_dpdk NAME CLIENT_ARGS...   (server: echo; PERF_MTU sets both ends' MTU)
perf_dpdk() {
	local name=$1 mtu=${PERF_MTU:+--mtu $PERF_MTU} poll=$(perf_poll); shift
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-perf" $(tb_pair_eal "s$name" server) -- --ip 198.18.3.2/24 --server \
		--port 7000 --echo $poll --seconds $((SECS + 20)) $mtu >/dev/null 2>"$TB_DIR/s$name.log" &
	TB_PIDS[srv]=$!
	sleep 1
	timeout $((SECS + 30)) "$TB_BUILD/wharf-perf" $(tb_pair_eal "c$name" client) -- \
		--ip 198.18.3.1/24 --peer 198.18.3.2 --port 7000 $poll --seconds "$SECS" $mtu "$@" \
		>"$OUT/$name.json" 2>"$TB_DIR/c$name.log"
	result "$name" $? "$TB_DIR/c$name.log"
	tb_stop srv
}

# The kernel side of a pair run as the DPDK one is: server on core 1, client on core 0
# (taskset: kernel TCP ignores EAL's -l), in the same idle mode (--poll: epoll_wait without
# sleeping; PERF_SLEEP=1: both block in epoll_wait), so the ratio compares the stacks, not a
# spin against a sleep.
perf_kernel() {
	local name=$1 poll=$(perf_poll); shift
	taskset -c 1 "$TB_BUILD/wharf-perf" -- --protocol kernel --server --port 7001 --echo $poll \
		--seconds $((SECS + 20)) >/dev/null 2>"$TB_DIR/s$name.log" &
	TB_PIDS[ksrv]=$!
	sleep 0.5
	timeout $((SECS + 30)) taskset -c 0 "$TB_BUILD/wharf-perf" -- --protocol kernel --peer 127.0.0.1 \
		--port 7001 $poll --seconds "$SECS" "$@" >"$OUT/$name.json" 2>"$TB_DIR/c$name.log"
	result "$name" $? "$TB_DIR/c$name.log"
	tb_stop ksrv
}

# pp_pair DPDK_NAME KERNEL_NAME [HIST]: the 64 B ping-pong on both stacks, BENCH_RTT_ROUNDS
# rounds (default 3), DPDK and kernel in turn. The same binary's p50 spreads 1.6-4.2 us
# between runs here (host noise), so one pair of runs decides little: the round whose
# DPDK/kernel p50 ratio is the median of the rounds' (of an even count, the higher of the
# middle two, the one less in DPDK's favour) becomes DPDK_NAME and KERNEL_NAME, each
# with "rounds" (every round's p50s, [DPDK, kernel]) and "round" (the one kept). HIST: keep
# the kept round's latency histograms (dpdk_rtt.txt, kernel_rtt.txt) for the CDF plot.
pp_pair() {
	local d=$1 k=$2 hist=${3:-} r rounds=${BENCH_RTT_ROUNDS:-3} hd=() hk=()
	for r in $(seq 1 "$rounds"); do
		[ -n "$hist" ] && hd=(--hist "$OUT/dpdk_rtt.r$r.txt") hk=(--hist "$OUT/kernel_rtt.r$r.txt")
		perf_dpdk "$d.r$r" --size 64 "${hd[@]}"
		perf_kernel "$k.r$r" --size 64 "${hk[@]}"
	done
	PYTHONPATH="$TB_ROOT/testbed" /usr/bin/python3 - "$OUT" "$d" "$k" "$rounds" "$hist" <<'EOF'
import json, os, shutil, sys
from bench_json import read_result
out, d, k, rounds, hist = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
def load(n):
    return read_result(os.path.join(out, n + ".json")) or {"failed": "no result"}
runs = [(r, load(f"{d}.r{r}"), load(f"{k}.r{r}")) for r in range(1, rounds + 1)]
ok = [x for x in runs if x[1].get("rtt_p50_us") and x[2].get("rtt_p50_us")]
ok.sort(key=lambda x: x[1]["rtt_p50_us"] / x[2]["rtt_p50_us"])
r, jd, jk = ok[len(ok) // 2] if ok else runs[0]
p50s = [[x[1].get("rtt_p50_us"), x[2].get("rtt_p50_us")] for x in runs]
for name, j, stack in ((d, jd, "dpdk"), (k, jk, "kernel")):
    if "failed" not in j:
        j = dict(j, rounds=p50s, round=r)
    with open(os.path.join(out, name + ".json"), "w") as f:
        f.write(json.dumps(j) + "\n")
    if hist and os.path.exists(os.path.join(out, f"{stack}_rtt.r{r}.txt")):
        shutil.copy(os.path.join(out, f"{stack}_rtt.r{r}.txt"), os.path.join(out, f"{stack}_rtt.txt"))
EOF
}

part_transport() {
	rm -f "$OUT/dpdk_rtt.txt" "$OUT/kernel_rtt.txt"
	pp_pair dpdk_pingpong kernel_pingpong hist
	# The same pair with every process sleeping when idle, as a PS node runs by default: both
	# stacks spin after work (adapted up to WHARF_IDLE_SPIN_US, default 2 ms) before they
	# sleep. Then with no spin (WHARF_IDLE_SPIN_US=0 on both): every message waits for a wake-up.
	PERF_SLEEP=1 pp_pair dpdk_pingpong_sleep kernel_pingpong_sleep
	WHARF_IDLE_SPIN_US=0 PERF_SLEEP=1 pp_pair dpdk_pingpong_nospin kernel_pingpong_nospin
	# The floor under the polling ping-pong: one 64 B frame each way on the same pair with no
	# protocol (wharf-pktgen --step 64, both polling).
	pmd_step 64 pmd_pingpong
	perf_dpdk dpdk_rate --size 64 --mode stream
	perf_kernel kernel_rate --size 64 --mode stream
	perf_dpdk dpdk_stream --size 1048576 --mode stream
	# The same with 9000-byte frames (a datacenter PS network's jumbo MTU); the kernel side
	# is loopback, whose MTU is 64 KiB.
	PERF_MTU=9000 perf_dpdk dpdk_stream_jumbo --size 1048576 --mode stream
	perf_kernel kernel_stream --size 1048576 --mode stream
}

part_tool() { # NAME TOOL ARGS... : a tool that prints one JSON object last
	local name=$1 tool=$2; shift 2
	if [ ! -x "$TB_BUILD/wharf-$tool" ]; then
		echo "{\"missing\":\"build/wharf-$tool not built\"}" >"$OUT/$name.json"
		return
	fi
	# PART_PIN=CPU: the tool runs pinned there (a per-lcore figure is an lcore's: on this
	# VM's two L3 complexes a thread moved to the other CPU starts with cold caches).
	timeout 600 ${PART_PIN:+taskset -c "$PART_PIN"} "$TB_BUILD/wharf-$tool" "$@" \
		>"$OUT/$name.json" 2>"$TB_DIR/$name.log"
	result "$name" $? "$TB_DIR/$name.log"
}

# Fusion on vs off over a direct virtio-user/vhost pair (DPDK) and over loopback (kernel):
# a step of 1000 x 64 B tensors, a 16 B..4 KiB mix, and a lone message's latency. The server listens on P (off)
# and P+1 (on).
part_fuse() {
	if [ ! -x "$TB_BUILD/wharf-fuse-bench" ]; then
		echo '{"missing":"build/wharf-fuse-bench not built"}' >"$OUT/fuse.json"; return
	fi
	# The kernel backend as the DPDK pair below runs: same cores, both busy-polling.
	taskset -c 1 "$TB_BUILD/wharf-fuse-bench" --server --protocol kernel --port 7310 --poll \
		--seconds 300 >/dev/null 2>"$TB_DIR/fzk_srv.log" &
	TB_PIDS[fzk]=$!
	sleep 0.5
	timeout 300 taskset -c 0 "$TB_BUILD/wharf-fuse-bench" --peer 127.0.0.1 --protocol kernel \
		--port 7310 --poll --steps 50 --rounds 3 --echoes 2000 >"$OUT/fuse_kernel.json" \
		2>"$TB_DIR/fzk_cli.log"
	result fuse_kernel $? "$TB_DIR/fzk_cli.log"
	tb_stop fzk
	# DPDK: the same direct virtio-user/vhost pair as the transport part, both sides
	# busy-polling, so the figure is the stacks' and not a third process's (the switch)
	# wake-ups on two shared cores.
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-fuse-bench" $(tb_pair_eal fzsrv server) -- --server --ip 198.18.3.2/24 \
		--port 7300 --poll --seconds 300 >/dev/null 2>"$TB_DIR/fzsrv.log" &
	TB_PIDS[fzsrv]=$!
	tb_wait_log "$TB_DIR/fzsrv.log" "server on ports" 20
	timeout 300 "$TB_BUILD/wharf-fuse-bench" $(tb_pair_eal fzcli client) -- --peer 198.18.3.2 \
		--ip 198.18.3.1/24 --port 7300 --poll --steps 50 --rounds 3 --echoes 2000 \
		>"$OUT/fuse.json" 2>"$TB_DIR/fzcli.log"
	result fuse $? "$TB_DIR/fzcli.log"
	tb_stop fzsrv
	# The raw PMD's floor under the same step: the fused 64 B step's bytes on the wire, written
	# into 9000-byte frames (the pair's most favourable framing), each frame sent once
	# written, one frame back per step; no protocol. Its steps/s over the unfused step's is
	# the most any fusion could give on this link.
	# Without the fused step's bytes (the fuse run failed) the last measured count stands in:
	# said on the console and in fuse_pmd_step_bytes.json, which the report cites beside
	# every figure of these steps.
	local bytes
	bytes=$(PYTHONPATH="$TB_ROOT/testbed" /usr/bin/python3 - "$OUT" "$FUSE_STEP_BYTES_FALLBACK" <<'EOF'
import json, os, sys
from bench_json import read_result
out, fallback = sys.argv[1], int(sys.argv[2])
fz = read_result(os.path.join(out, "fuse.json")) or {}
v = ((fz.get("step_1000x64B") or {}).get("on") or {}).get("tx_bytes_per_step")
if isinstance(v, (int, float)) and v > 0:
    rec = {"bytes": int(v), "from": "fuse.json step_1000x64B.on.tx_bytes_per_step"}
else:
    why = fz.get("failed") or fz.get("missing") or "no tx_bytes_per_step"
    rec = {"bytes": fallback, "from": "fallback",
           "fallback": f"{fallback} B, the last measured fused 64 B step (fuse.json: {why})"}
    print(f"[bench] fuse: FALLBACK: the raw-PMD step uses {rec['fallback']}", file=sys.stderr)
with open(os.path.join(out, "fuse_pmd_step_bytes.json"), "w") as f:
    f.write(json.dumps(rec) + "\n")
print(rec["bytes"])
EOF
)
	pmd_step "$bytes" fuse_pmd_step
	# The same bytes appended 71 at a time (a 64 B tensor and its 7-byte sub-header), as
	# the packer does: with fuse's line writer, and with memcpy (which must take back each
	# recycled line from the peer's core before writing it).
	pmd_step "$bytes" fuse_pmd_step_pieces --piece 71
	pmd_step "$bytes" fuse_pmd_step_pieces_plain --piece 71 --plain
}

pmd_step() { # BYTES NAME [pktgen --tx args]
	local bytes=$1 name=$2; shift 2
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgsrx server) -- --rx --step "$bytes" --mtu 9000 \
		--seconds "$SECS" >/dev/null 2>"$TB_DIR/pgsrx.log" &
	TB_PIDS[pgsrx]=$!
	sleep 1
	timeout 60 "$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgstx client) -- --tx --step "$bytes" \
		--mtu 9000 --seconds "$SECS" "$@" >"$OUT/$name.json" 2>"$TB_DIR/pgstx.log"
	result "$name" $? "$TB_DIR/pgstx.log"
	wait "${TB_PIDS[pgsrx]}"; unset "TB_PIDS[pgsrx]"
}

# The time of the run behind each result, in OUT/run_at.json (name -> UTC start of the make
# bench that made it): results of parts not rerun keep theirs, and the report prints it
# beside every figure.
stamp() { # TIME NAME...
	/usr/bin/python3 - "$OUT/run_at.json" "$@" <<'EOF'
import json, sys
path, at, names = sys.argv[1], sys.argv[2], sys.argv[3:]
try:
    with open(path) as f:
        d = json.load(f)
except (OSError, ValueError):
    d = {}
d.update({n: at for n in names})
with open(path, "w") as f:
    json.dump(d, f, indent=1, sort_keys=True)
EOF
}

# run_part PART "RESULTS" CMD...: PART's last results go, CMD runs, and every result is stamped
# with this run's time; a result CMD did not write is a failure with the reason.
run_part() {
	local part=$1 names=$2 rc n; shift 2
	want "$part" || return 0
	tb_log "$part"
	for n in $names; do rm -f "$OUT/$n.json"; done
	"$@"
	rc=$?
	for n in $names; do
		[ -s "$OUT/$n.json" ] || failed "$n" "part $part (exit status $rc) wrote no result"
	done
	stamp "$BENCH_RUN_AT" $names
}

run_part pmd "pmd_rx pmd_tx" part_pmd
run_part transport "dpdk_pingpong kernel_pingpong dpdk_pingpong_sleep kernel_pingpong_sleep
	dpdk_pingpong_nospin kernel_pingpong_nospin dpdk_rate kernel_rate dpdk_stream dpdk_stream_jumbo kernel_stream" part_transport
run_part fuse "fuse fuse_kernel fuse_pmd_step_bytes fuse_pmd_step fuse_pmd_step_pieces
	fuse_pmd_step_pieces_plain" part_fuse
PART_PIN=1 run_part shard shard part_tool shard shard-bench ${BENCH_SHARD_ARGS:-}
run_part e2e "${BENCH_E2E_PARTS:-ps ps_direct ps_bytes ps_lanes ps_direct_lanes train train_direct train_fuse train_torch train_torch_direct}" "$TB_ROOT/testbed/bench_e2e.sh" "$OUT"

/usr/bin/python3 "$TB_ROOT/testbed/bench_report.py" "$OUT" || exit 1
if command -v gnuplot >/dev/null && [ -s "$OUT/dpdk_rtt.txt" ] && [ -s "$OUT/kernel_rtt.txt" ]; then
	gnuplot -e "out='$OUT/rtt_cdf.png'; d='$OUT/dpdk_rtt.txt'; k='$OUT/kernel_rtt.txt'" \
		"$TB_ROOT/testbed/rtt_cdf.gp" 2>"$TB_DIR/gnuplot.log" || tb_log "gnuplot failed"
fi
cat "$OUT/report.md"
tb_log "report: build/bench/report.json, report.md, rtt_cdf.png"
/usr/bin/python3 "$TB_ROOT/testbed/bench_docs.py" "$OUT/report.json"
