#!/usr/bin/env bash
# End to end, one short softmax job (1 PS + 1 worker, protocol dpdk over the switch) per
# configuration source: flags, TF_CONFIG (+ .endpoint_map found through
# TF_SEASTAR_ENDPOINT_MAP_PATH), Paddle's variables (+ --data-addr), and the JSON file
# (+ its endpoint_map key, and EAL arguments from its eal_args and WHARF_EAL_ARGS). Each must
# train (accuracy above chance by far) and the worker must report the protocol and mode the
# source asked for. Bad input: a malformed .endpoint_map line must be refused with the file
# and line named.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

TRAIN="--model softmax --epochs 1 --train-limit 3000 --test-limit 1000 --wait-timeout 30 --retry-interval 1"
tb_init
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:47700=198.19.0.1:6666\n127.0.0.1:47701=198.19.0.2:5555\n' >"$MAP"

check_worker() { # NAME MODE
	local out=$TB_DIR/$1.out
	grep -q '"protocol":"dpdk"' "$out" && grep -q "\"mode\":\"$2\"" "$out" ||
		{ tail -n 5 "$TB_DIR/$1.log" "$out" >&2; tb_fail "$1: no dpdk/$2 result line"; }
	local acc; acc=$(tb_json "$out" test_accuracy)
	[ "$(echo "$acc > 0.6" | bc)" = 1 ] || tb_fail "$1: test accuracy $acc, expected > 0.6"
	tb_pass "$1: test accuracy $acc over dpdk ($2)"
}

one_run() { # NAME MODE -- env for ps -- env for worker  (flags passed through PSF/WF)
	local name=$1 mode=$2
	tb_switch 2 || tb_fail "switch"
	env $PSENV "$TB_BUILD/wharf-train" $(tb_eal "ps-$name" 0) -- $PSF >"$TB_DIR/ps-$name.out" 2>"$TB_DIR/ps-$name.log" &
	TB_PIDS[ps-$name]=$!
	env $WENV timeout 60 "$TB_BUILD/wharf-train" $(tb_eal "w-$name" 1) -- $WF $TRAIN \
		>"$TB_DIR/w-$name.out" 2>"$TB_DIR/w-$name.log" || { tail -n 8 "$TB_DIR/w-$name.log" "$TB_DIR/ps-$name.log" >&2; tb_fail "$name: worker failed"; }
	"$TB_BUILD/wharf-ctl" 127.0.0.1:47700 shutdown >/dev/null || tb_fail "$name: ctl shutdown"
	tb_stop "ps-$name"; tb_stop switch
	check_worker "w-$name" "$mode"
}

# 1. flags
PSENV="WHARF_X=1"; WENV="WHARF_X=1"
PSF="--role ps --ps 127.0.0.1:47700 --num-workers 1 --endpoint-map $MAP --protocol dpdk --mode async --model softmax"
WF="--role worker --ps 127.0.0.1:47700 --workers 127.0.0.1:47701 --endpoint-map $MAP --protocol dpdk --mode async"
one_run flags async

# 2. TF_CONFIG; the map comes from TF_SEASTAR_ENDPOINT_MAP_PATH (a directory, as DeepRec's)
CL='"cluster":{"ps":["127.0.0.1:47700"],"worker":["127.0.0.1:47701"]}'
PSENV="TF_SEASTAR_ENDPOINT_MAP_PATH=$TB_DIR WHARF_MODE=sync"
WENV="$PSENV"
tb_switch 2 || tb_fail "switch"
env $PSENV TF_CONFIG="{$CL,\"task\":{\"type\":\"ps\",\"index\":0}}" "$TB_BUILD/wharf-train" $(tb_eal ps-tf 0) -- --model softmax \
	>"$TB_DIR/ps-tf.out" 2>"$TB_DIR/ps-tf.log" &
TB_PIDS[ps-tf]=$!
env $WENV TF_CONFIG="{$CL,\"task\":{\"type\":\"worker\",\"index\":0}}" timeout 60 "$TB_BUILD/wharf-train" $(tb_eal w-tf 1) -- $TRAIN \
	>"$TB_DIR/w-tf.out" 2>"$TB_DIR/w-tf.log" || { tail -n 8 "$TB_DIR/w-tf.log" "$TB_DIR/ps-tf.log" >&2; tb_fail "tf: worker failed"; }
"$TB_BUILD/wharf-ctl" 127.0.0.1:47700 shutdown >/dev/null || tb_fail "tf: ctl shutdown"
tb_stop ps-tf; tb_stop switch
check_worker w-tf sync

# 3. Paddle's variables (the server finds its index as POD_IP:PADDLE_PORT); the worker gives its
#    data address with --data-addr, as configs/paddle_trainer.env says
P="PADDLE_PSERVERS_IP_PORT_LIST=127.0.0.1:47700 PADDLE_TRAINERS_NUM=1 TF_SEASTAR_ENDPOINT_MAP_PATH=$MAP WHARF_MODE=geo WHARF_GEO_K=4"
PSENV="$P TRAINING_ROLE=PSERVER POD_IP=127.0.0.1 PADDLE_PORT=47700"; PSF="--model softmax"
WENV="$P TRAINING_ROLE=TRAINER PADDLE_TRAINER_ID=0"; WF="--data-addr 198.19.0.2"
one_run paddle geo

# 4. the JSON file, with its endpoint_map key, and EAL arguments on no command line: the
#    worker's from the file's eal_args (an array of words), the PS's from WHARF_EAL_ARGS,
#    which comes before the file (the file's name the worker's port: taken by the PS, both
#    would be on one port and the job could not run)
EALW=$(tb_eal w-json 1 | python3 -c 'import json, sys; print(json.dumps(sys.stdin.read().split()))')
cat >"$TB_DIR/cluster.json" <<JSON
{"cluster": {"ps": ["127.0.0.1:47700"], "worker": ["127.0.0.1:47701"]},
 "endpoint_map": "$MAP", "protocol": "dpdk", "mode": "sync", "wait_timeout_s": 30,
 "net": {"ps": {"enable_polling": false}, "worker": {"enable_polling": false}},
 "eal_args": $EALW}
JSON
tb_switch 2 || tb_fail "switch"
WHARF_EAL_ARGS="$(tb_eal ps-json 0)" "$TB_BUILD/wharf-train" -- --config "$TB_DIR/cluster.json" \
	--role ps --model softmax >"$TB_DIR/ps-json.out" 2>"$TB_DIR/ps-json.log" &
TB_PIDS[ps-json]=$!
timeout 60 "$TB_BUILD/wharf-train" -- --config "$TB_DIR/cluster.json" --role worker --task-index 0 \
	$TRAIN >"$TB_DIR/w-json.out" 2>"$TB_DIR/w-json.log" ||
	{ tail -n 8 "$TB_DIR/w-json.log" "$TB_DIR/ps-json.log" >&2; tb_fail "json: worker failed"; }
"$TB_BUILD/wharf-ctl" 127.0.0.1:47700 shutdown >/dev/null || tb_fail "json: ctl shutdown"
tb_stop ps-json; tb_stop switch
check_worker w-json sync

# 5. a malformed .endpoint_map line is refused, naming the file and the line
printf '127.0.0.1:47700=198.19.0.1:6666\n127.0.0.1:47701 198.19.0.2\n' >"$TB_DIR/bad.map"
"$TB_BUILD/wharf-train" -- --role worker --ps 127.0.0.1:47700 --workers 127.0.0.1:47701 \
	--endpoint-map "$TB_DIR/bad.map" >"$TB_DIR/bad.out" 2>"$TB_DIR/bad.log"
rc=$?
[ $rc -eq 2 ] && grep -q "bad.map:2" "$TB_DIR/bad.log" || { cat "$TB_DIR/bad.log" >&2; tb_fail "bad map: exit $rc"; }
tb_pass "malformed .endpoint_map refused: $(head -n 1 "$TB_DIR/bad.log")"
