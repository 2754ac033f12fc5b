#!/usr/bin/env bash
# The readiness path (Paddle's): a worker started before its server says "server not ready,
# wait N sec to retry... not ready endpoints: [...]" once per retry and trains once the server
# is up (protocol dpdk over the switch); a worker whose server never comes gives up cleanly
# after wait_timeout_s with the endpoint it waited for in the message.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47720=198.19.0.1:6666\n127.0.0.1:47721=198.19.0.2:5555\n' >"$MAP"
CL="--ps 127.0.0.1:47720 --workers 127.0.0.1:47721 --endpoint-map $MAP --protocol dpdk --mode sync"

# 1. worker first, server 4 s later
tb_switch 2 || tb_fail "switch"
tb_node w 1 train $CL --role worker --task-index 0 --model softmax --epochs 1 --train-limit 2000 \
	--test-limit 1000 --retry-interval 1 --wait-timeout 40
tb_wait_log "$TB_DIR/w.log" "server not ready" 20 || { cat "$TB_DIR/w.log" >&2; tb_fail "no not-ready line"; }
sleep 3
tb_node ps 0 train $CL --role ps --model softmax
for _ in $(seq 1 60); do kill -0 "${TB_PIDS[w]}" 2>/dev/null || break; sleep 1; done
grep -q '"test_accuracy"' "$TB_DIR/w.out" || { tail "$TB_DIR/w.log" "$TB_DIR/ps.log" >&2; tb_fail "worker did not train after the server came up"; }
n=$(grep -c "server not ready, wait 1 sec to retry... not ready endpoints: \['127.0.0.1:47720'\]" "$TB_DIR/w.log")
[ "$n" -ge 2 ] || { cat "$TB_DIR/w.log" >&2; tb_fail "expected a not-ready line per retry, got $n"; }
tb_pass "worker waited ($n retries, endpoint named) and trained: accuracy $(tb_json "$TB_DIR/w.out" test_accuracy)"
tb_stop ps; tb_stop switch

# 2. no server at all: a clean give-up after the timeout, endpoint named, exit status 1
t0=$(date +%s)
timeout 30 "$TB_BUILD/wharf-train" -- --role worker --ps 127.0.0.1:47730 --num-workers 1 \
	--protocol kernel --wait-timeout 3 --retry-interval 1 --model softmax \
	>"$TB_DIR/lone.out" 2>"$TB_DIR/lone.log"
rc=$?; t1=$(date +%s)
[ $rc -eq 1 ] || { cat "$TB_DIR/lone.log" >&2; tb_fail "lone worker exit $rc, expected 1"; }
grep -q "gave up after 3 s .*not ready endpoints: \['127.0.0.1:47730'\]" "$TB_DIR/lone.log" ||
	{ cat "$TB_DIR/lone.log" >&2; tb_fail "give-up message does not name the endpoint"; }
[ $((t1 - t0)) -le 10 ] || tb_fail "gave up after $((t1 - t0)) s, expected about 3"
tb_pass "lone worker gave up after $((t1 - t0)) s: $(grep 'gave up' "$TB_DIR/lone.log")"
