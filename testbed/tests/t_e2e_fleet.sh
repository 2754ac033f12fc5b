#!/usr/bin/env bash
# The fleet role API end to end (ps_core/ps_fleet.h, as Paddle's fleet.init(role)): one
# binary, wharf-ps-bench, started three times with the same arguments and only Paddle's
# environment telling each process what it is — TRAINING_ROLE=PSERVER with POD_IP/PADDLE_PORT
# (1 PS), TRAINING_ROLE=TRAINER with PADDLE_TRAINER_ID 0 and 1 (2 workers) — over protocol dpdk
# on the switch (virtio-user), data addresses from the .endpoint_map that
# TF_SEASTAR_ENDPOINT_MAP_PATH names. Each worker must pull and push through the server and
# report a result for dpdk/async with 2 workers; the server must have served both. Bad input:
# an unknown TRAINING_ROLE and a mode ps-bench cannot measure are refused with exit status 2
# and the variable named.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48300
tb_train_map $B
MAP=$TB_TRAIN_MAP
COMMON="PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:$B PADDLE_TRAINERS_NUM=2
PADDLE_TRAINER_ENDPOINTS=127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2))
TF_SEASTAR_ENDPOINT_MAP_PATH=$MAP WHARF_PROTOCOL=dpdk WHARF_MODE=async WHARF_WAIT_TIMEOUT_S=30"
ARGS="--seconds 1 --batch 500 --keys 1000000"

# Refusals first (no switch needed: configuration fails before any EAL start).
env $COMMON TRAINING_ROLE=BOSS "$TB_BUILD/wharf-ps-bench" -- $ARGS >/dev/null 2>"$TB_DIR/bad-role.log"
rc=$?
[ $rc = 2 ] && grep -q "TRAINING_ROLE" "$TB_DIR/bad-role.log" ||
	{ cat "$TB_DIR/bad-role.log" >&2; tb_fail "TRAINING_ROLE=BOSS: exit $rc, expected 2 naming TRAINING_ROLE"; }
env $COMMON WHARF_MODE=sync TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=0 "$TB_BUILD/wharf-ps-bench" -- $ARGS \
	>/dev/null 2>"$TB_DIR/bad-mode.log"
rc=$?
[ $rc = 2 ] && grep -q "expected --mode async" "$TB_DIR/bad-mode.log" ||
	{ cat "$TB_DIR/bad-mode.log" >&2; tb_fail "WHARF_MODE=sync: exit $rc, expected 2 asking for async"; }
tb_pass "bad role and unsupported mode refused with exit 2 and the reason"

tb_switch 3 || tb_fail "switch"
# Same binary, same arguments; only the environment differs.
start_node() { # NAME PORT ENV...
	local name=$1 port=$2; shift 2
	env $COMMON "$@" "$TB_BUILD/wharf-ps-bench" $(tb_eal "$name" "$port") -- $ARGS \
		>"$TB_DIR/$name.out" 2>"$TB_DIR/$name.log" &
	TB_PIDS[$name]=$!
}
start_node ps 0 TRAINING_ROLE=PSERVER POD_IP=127.0.0.1 PADDLE_PORT=$B
start_node w0 1 TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=0
start_node w1 2 TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=1
for _ in $(seq 1 450); do
	kill -0 "${TB_PIDS[w0]}" 2>/dev/null || kill -0 "${TB_PIDS[w1]}" 2>/dev/null || break
	sleep 0.2
done
STATUS=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status 2>&1)
"$TB_BUILD/wharf-ctl" 127.0.0.1:$B shutdown >/dev/null 2>&1 || tb_fail "ctl shutdown of the server"
tb_wait_log "$TB_DIR/ps.log" "stopped after" 10 || tb_fail "the server did not stop on shutdown"
for n in w0 w1 ps; do tb_stop "$n"; done

grep -q "serving 1 table" "$TB_DIR/ps.log" || { tail -n 8 "$TB_DIR/ps.log" >&2; tb_fail "no server role from TRAINING_ROLE=PSERVER"; }
for i in 0 1; do
	out=$TB_DIR/w$i.out
	grep -q "\"worker\":$i,\"workers\":2,\"servers\":1,\"protocol\":\"dpdk\"" "$out" && grep -q '"mode":"async"' "$out" ||
		{ tail -n 8 "$TB_DIR/w$i.log" "$TB_DIR/ps.log" >&2; tb_fail "worker $i: no dpdk/async result as trainer $i of 2"; }
	for k in pull_keys_per_s push_keys_per_s pull_p99_us push_p99_us; do
		v=$(tb_json "$out" "$k")
		[ "$(echo "$v" | awk '{print ($1 > 0)}')" = 1 ] || tb_fail "worker $i: $k = $v, expected > 0"
	done
	tb_pass "worker $i (TRAINING_ROLE=TRAINER, PADDLE_TRAINER_ID=$i): pull $(tb_json "$out" pull_keys_per_s) keys/s p99 $(tb_json "$out" pull_p99_us) us, push $(tb_json "$out" push_keys_per_s) keys/s over dpdk"
done
# The server counted both workers' requests (pull + push phases, warm-up included).
reqs=$(sed -nE 's/.*stopped after ([0-9]+) requests.*/\1/p' "$TB_DIR/ps.log")
want=$(( $(tb_json "$TB_DIR/w0.out" pull_requests) + $(tb_json "$TB_DIR/w0.out" push_requests) \
	+ $(tb_json "$TB_DIR/w1.out" pull_requests) + $(tb_json "$TB_DIR/w1.out" push_requests) ))
[ -n "$reqs" ] && [ "$reqs" -ge "$want" ] || { echo "$STATUS" >&2; tb_fail "server served ${reqs:-?} requests, workers timed $want"; }
tb_pass "one binary, roles from Paddle's environment: 1 PS served $reqs requests of 2 workers over dpdk"
