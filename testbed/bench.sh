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
#              (MTU 1500 and 9000)
#   fuse       wharf-fuse-bench: fusion on vs off, DPDK (direct pair, polling) and kernel;
#              and wharf-pktgen --step: the raw PMD's floor under a fused step's bytes
#   shard      wharf-shard-bench: in-process sparse push/pull keys/s per lcore
#   e2e        PS pull/push keys/s (1 and 2 workers via the switch; 1 worker on a direct
#              pair, sleeping and polling) and end-to-end training samples/s, DPDK vs
#              kernel, fusion on vs off (testbed/bench_e2e.sh)
# BENCH_SECONDS (default 3) sets the length of each timed run. BENCH_PARTS (default all:
# "pmd transport fuse shard e2e") reruns only some parts; the others' last results stay in
# build/bench and go into the report again.
set -u
. "$(dirname "$0")/cluster/tb.sh"
OUT=$TB_ROOT/build/bench
SECS=${BENCH_SECONDS:-3}
mkdir -p "$OUT"
PARTS=${BENCH_PARTS:-pmd transport fuse shard e2e}
[ -n "${BENCH_PARTS:-}" ] || rm -f "$OUT"/*.json "$OUT"/*.txt "$OUT"/*.png "$OUT"/report.md
want() { case " $PARTS " in *" $1 "*) return 0;; esac; return 1; }
tb_init

part_pmd() {
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgrx server) -- --rx --seconds "$SECS" \
		>"$OUT/pmd_rx.json" 2>"$TB_DIR/pgrx.log" &
	TB_PIDS[pgrx]=$!
	sleep 1
	timeout 60 "$TB_BUILD/wharf-pktgen" $(tb_pair_eal pgtx client) -- --tx --seconds "$SECS" \
		>"$OUT/pmd_tx.json" 2>"$TB_DIR/pgtx.log"
	wait "${TB_PIDS[pgrx]}"; unset "TB_PIDS[pgrx]"
}

# perf_dpdk NAME CLIENT_ARGS...   (server: echo, busy-polling; PERF_MTU sets both ends' MTU)
perf_dpdk() {
	local name=$1 mtu=${PERF_MTU:+--mtu $PERF_MTU}; shift
	rm -f "$TB_DIR/pair.sock"
	"$TB_BUILD/wharf-perf" $(tb_pair_eal "s$name" server) -- --ip 198.18.3.2/24 --server \
		--port 7000 --echo --poll --seconds $((SECS + 20)) $mtu >/dev/null 2>"$TB_DIR/s$name.log" &
	TB_PIDS[srv]=$!
	sleep 1
	timeout $((SECS + 30)) "$TB_BUILD/wharf-perf" $(tb_pair_eal "c$name" client) -- \
		--ip 198.18.3.1/24 --peer 198.18.3.2 --port 7000 --poll --seconds "$SECS" $mtu "$@" \
		>"$OUT/$name.json" 2>"$TB_DIR/c$name.log" || tb_log "$name: client failed"
	tb_stop srv
}

perf_kernel() {
	local name=$1; shift
	"$TB_BUILD/wharf-perf" -- --protocol kernel --server --port 7001 --echo \
		--seconds $((SECS + 20)) >/dev/null 2>"$TB_DIR/s$name.log" &
	TB_PIDS[ksrv]=$!
	sleep 0.5
	timeout $((SECS + 30)) "$TB_BUILD/wharf-perf" -- --protocol kernel --peer 127.0.0.1 \
		--port 7001 --seconds "$SECS" "$@" >"$OUT/$name.json" 2>"$TB_DIR/c$name.log" \
		|| tb_log "$name: client failed"
	tb_stop ksrv
}

part_transport() {
	perf_dpdk dpdk_pingpong --size 64 --hist "$OUT/dpdk_rtt.txt"
	perf_kernel kernel_pingpong --size 64 --hist "$OUT/kernel_rtt.txt"
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
	timeout 600 "$TB_BUILD/wharf-$tool" "$@" >"$OUT/$name.json" 2>"$TB_DIR/$name.log" || true
	[ -s "$OUT/$name.json" ] || echo "{\"failed\":\"wharf-$tool exited without a result\"}" >"$OUT/$name.json"
}

want pmd && { tb_log "pmd"; part_pmd; }
want transport && { tb_log "transport"; part_transport; }
# Fusion on vs off over a direct virtio-user/vhost pair (DPDK) and over loopback (kernel):
# a step of 1000 x 64 B tensors, a 16 B..4 KiB mix, and a lone message's latency. The server listens on P (off)
# and P+1 (on).
part_fuse() {
	if [ ! -x "$TB_BUILD/wharf-fuse-bench" ]; then
		echo '{"missing":"build/wharf-fuse-bench not built"}' >"$OUT/fuse.json"; return
	fi
	"$TB_BUILD/wharf-fuse-bench" --server --protocol kernel --port 7310 --seconds 300 \
		>/dev/null 2>"$TB_DIR/fzk_srv.log" &
	TB_PIDS[fzk]=$!
	sleep 0.5
	timeout 300 "$TB_BUILD/wharf-fuse-bench" --peer 127.0.0.1 --protocol kernel --port 7310 \
		--steps 50 --rounds 3 --echoes 2000 2>"$TB_DIR/fzk_cli.log" | grep '^{' | tail -n 1 \
		>"$OUT/fuse_kernel.json"
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
		2>"$TB_DIR/fzcli.log" | grep '^{' | tail -n 1 >"$OUT/fuse.json"
	[ -s "$OUT/fuse.json" ] || echo '{"failed":"DPDK fuse-bench run gave no result"}' >"$OUT/fuse.json"
	tb_stop fzsrv
	# The raw PMD's floor under the same step: the fused 64 B step's bytes on the wire, written
	# into 9000-byte frames (the pair's most favourable framing), each frame sent once
	# written, one frame back per step; no protocol. Its steps/s over the unfused step's is
	# the most any fusion could give on this link.
	local bytes
	bytes=$(/usr/bin/python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["step_1000x64B"]["on"]["tx_bytes_per_step"]))' \
		"$OUT/fuse.json" 2>/dev/null) || bytes=70587
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
		--mtu 9000 --seconds "$SECS" "$@" >"$OUT/$name.json" 2>"$TB_DIR/pgstx.log" \
		|| echo '{"failed":"wharf-pktgen --step gave no result"}' >"$OUT/$name.json"
	wait "${TB_PIDS[pgsrx]}"; unset "TB_PIDS[pgsrx]"
}
want fuse && { tb_log "fuse"; part_fuse; }
want shard && { tb_log "shard"; part_tool shard shard-bench ${BENCH_SHARD_ARGS:-}; }
want e2e && { tb_log "ps, ps_direct and train"; "$TB_ROOT/testbed/bench_e2e.sh" "$OUT" || tb_log "bench_e2e failed"; }

/usr/bin/python3 "$TB_ROOT/testbed/bench_report.py" "$OUT" || exit 1
if command -v gnuplot >/dev/null && [ -s "$OUT/dpdk_rtt.txt" ] && [ -s "$OUT/kernel_rtt.txt" ]; then
	gnuplot -e "out='$OUT/rtt_cdf.png'; d='$OUT/dpdk_rtt.txt'; k='$OUT/kernel_rtt.txt'" \
		"$TB_ROOT/testbed/rtt_cdf.gp" 2>"$TB_DIR/gnuplot.log" || tb_log "gnuplot failed"
fi
cat "$OUT/report.md"
tb_log "report: build/bench/report.json, report.md, rtt_cdf.png"
/usr/bin/python3 "$TB_ROOT/testbed/bench_docs.py" "$OUT/report.json"
