#!/usr/bin/env bash
# wharf-ps-bench's sweep flags end to end, over kernel TCP on 127.0.0.1 (seconds, no switch):
# a worker runs push-pulls of 64 rows of dim 64 on a sparse and a dense table, with 1 and with
# 8 requests in flight (--kind sparse,dense --inflight 1,8 --ops push-pull): four timed phases
# in one JSON line, each with requests and goodput above 0. With 8 in flight the requests
# overlap (mean in flight by Little's law, the latencies' sum over the phase's time, above 4;
# with 1, at most 1), and the server counted every request the worker timed (a dense
# push-pull is two: a push and a pull). A worker stopped by SIGINT mid-sweep prints the phases
# it finished and exits 3. Bad sweep flags are refused with exit status 2 and the flag named.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48040
CL="--protocol kernel --ps 127.0.0.1:$B --num-workers 1 --mode async --wait-timeout 20 --retry-interval 1"
ARGS="--dim 64 --keys 10000 --batch 64 --kind sparse,dense --dense-rows 256 --inflight 1,8 --ops push-pull --seconds 1"

refused() { # WHAT FLAGS... : exit status 2 and WHAT in the message
	local what=$1 rc; shift
	"$TB_BUILD/wharf-ps-bench" -- $CL --role worker "$@" >/dev/null 2>"$TB_DIR/bad.log"
	rc=$?
	[ $rc = 2 ] && grep -q -- "$what" "$TB_DIR/bad.log" ||
		{ cat "$TB_DIR/bad.log" >&2; tb_fail "$*: exit $rc, expected 2 naming $what"; }
}
refused "--inflight: '0'" --inflight 0
refused "--inflight: '65'" --inflight 1,65
refused "--ops: 'push-pul' is not one of pull, push, push-pull" --ops pull,push-pul
refused "--batch: '16' given twice" --batch 16,16
refused "--kind: 'sparse,' expected a comma-separated list" --kind sparse,
refused "--dense-rows 8: fewer rows than --batch 16" --kind dense --dense-rows 8 --batch 16
refused "--kind dense: with --model-file" --kind dense --model-file "$TB_ROOT/configs/model_30.json"
tb_pass "bad sweep flags refused with exit 2: $(cat "$TB_DIR/bad.log")"

tb_node ps 0 ps-bench $CL --role ps $ARGS
tb_wait_log "$TB_DIR/ps.log" "serving" 20 || { cat "$TB_DIR/ps.log" >&2; tb_fail "the server did not come up"; }
timeout 60 "$TB_BUILD/wharf-ps-bench" -- $CL --role worker $ARGS >"$TB_DIR/w.out" 2>"$TB_DIR/w.log" ||
	{ cat "$TB_DIR/w.log" >&2; tb_fail "the worker failed"; }

# A worker stopped by SIGINT part way through its sweep (four 2-second phases, the signal
# 4 s in) prints the phases it finished, marked stopped, and exits with status 3.
"$TB_BUILD/wharf-ps-bench" -- $CL --role worker ${ARGS/--seconds 1/--seconds 2} --task-index 0 \
	>"$TB_DIR/ws.out" 2>"$TB_DIR/ws.log" &
wpid=$!
sleep 4
kill -INT $wpid
wait $wpid
rc=$?
[ $rc = 3 ] || { cat "$TB_DIR/ws.log" >&2; tb_fail "a worker stopped by SIGINT exited $rc, expected 3"; }
grep -q "stopped by a signal in the" "$TB_DIR/ws.log" || { cat "$TB_DIR/ws.log" >&2; tb_fail "the stop was not said"; }
out=$(/usr/bin/python3 - "$TB_DIR/ws.out" 2>&1 <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
if len(lines) != 1:
    sys.exit(f"{len(lines)} JSON lines, expected 1")
d = json.loads(lines[0])
ph = d["phases"]
if d.get("stopped") is not True or not 1 <= len(ph) <= 3:
    sys.exit(f"stopped {d.get('stopped')}, {len(ph)} phases: expected stopped with 1 to 3 of 4")
if any(p["requests"] <= 0 or p["gbit_per_s"] <= 0 for p in ph):
    sys.exit(f"a finished phase without requests: {ph}")
print(f"{len(ph)} of 4 phases printed, stopped")
PY
) || { cat "$TB_DIR/ws.out" >&2; tb_fail "$out"; }
tb_pass "worker stopped by SIGINT: exit 3, $out"
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B shutdown >/dev/null || tb_fail "shutdown"
tb_wait_log "$TB_DIR/ps.log" "stopped after" 10 || tb_fail "the server did not stop"
tb_stop ps
served=$(sed -nE 's/.*stopped after ([0-9]+) requests.*/\1/p' "$TB_DIR/ps.log")

# Every phase, checked; prints one summary line, or the failure.
out=$(/usr/bin/python3 - "$TB_DIR/w.out" "${served:-0}" 2>&1 <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith("{")][-1]
ph = json.loads(line)["phases"]
want = [(k, i) for k in ("sparse", "dense") for i in (1, 8)]
got = [(p["kind"], p["inflight"]) for p in ph]
if got != want or any(p["op"] != "push-pull" or p["batch"] != 64 for p in ph):
    sys.exit(f"phases {got}, expected {want}, all push-pull of 64")
timed = 0
for p in ph:
    name = f"{p['kind']} with {p['inflight']} in flight"
    if p["requests"] <= 0 or p["gbit_per_s"] <= 0:
        sys.exit(f"{name}: {p['requests']} requests, {p['gbit_per_s']} Gbit/s")
    lo, hi = (4, 8.05) if p["inflight"] == 8 else (0, 1.001)
    if not lo < p["mean_inflight"] <= hi:
        sys.exit(f"{name}: {p['mean_inflight']} requests in flight on average, expected in ({lo}, {hi}]")
    timed += p["requests"] * (2 if p["kind"] == "dense" else 1)
if int(sys.argv[2]) < timed:
    sys.exit(f"the server served {sys.argv[2]} requests, the worker timed {timed}")
print("; ".join(f"{p['kind']} x{p['inflight']}: {p['gbit_per_s']} Gbit/s, "
                f"{p['mean_inflight']} in flight" for p in ph) + f"; server served {sys.argv[2]}")
PY
) || { cat "$TB_DIR/w.out" >&2; tb_fail "$out"; }
tb_pass "push-pull sweep over sparse and dense, 1 and 8 in flight: $out"
