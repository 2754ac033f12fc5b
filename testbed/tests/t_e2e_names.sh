#!/usr/bin/env bash
# Host names where addresses go, resolved through /etc/hosts: this test adds names for its
# nodes (control names -> 127.0.0.1, data names -> 198.18.5.x), marked with its tag and
# removed at exit. 1. dpdk over the switch: the PS named by flags and an .endpoint_map of
# names, the worker by TF_CONFIG (names) and the same map; each node logs each name it
# resolved once, wharf-ctl shuts the PS down by name. 2. kernel TCP: the PS from Paddle's
# variables, its server list a name and POD_IP an address (Kubeflow's PaddleJob), the worker
# by flags. Both train a softmax well above chance. 3. A name the resolver does not know is
# refused naming its source (--ps[0]), by wharf-train and by wharf-ctl.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

TRAIN="--model softmax --epochs 1 --train-limit 3000 --test-limit 1000 --wait-timeout 30 --retry-interval 1"
tb_init
TAG=wharf-t-names-$$
# At exit: our lines out of /etc/hosts (rewritten in place: it may be a bind mount), then
# tb_cleanup with the test's status.
hosts_restore() {
	local rc=$? keep
	keep=$(grep -vF "# $TAG" /etc/hosts)
	printf '%s\n' "$keep" >/etc/hosts
	(exit $rc)
	tb_cleanup exit
}
[ -w /etc/hosts ] || { tb_skip names "/etc/hosts is not writable"; exit 0; }
trap hosts_restore EXIT
PS=ps0.$TAG.test; W=w0.$TAG.test; PSD=ps0-data.$TAG.test; WD=w0-data.$TAG.test
[ -z "$(tail -c 1 /etc/hosts)" ] || echo >>/etc/hosts
printf '127.0.0.1 %s %s # %s\n198.18.5.1 %s # %s\n198.18.5.2 %s # %s\n' \
	"$PS" "$W" "$TAG" "$PSD" "$TAG" "$WD" "$TAG" >>/etc/hosts
getent hosts "$PSD" | grep -q 198.18.5.1 || tb_fail "the names added to /etc/hosts do not resolve"
MAP=$TB_DIR/.endpoint_map
printf '%s:47900=%s:6666\n%s:47901=%s:5555\n' "$PS" "$PSD" "$W" "$WD" >"$MAP"

check_worker() { # NAME PROTOCOL
	local out=$TB_DIR/$1.out acc
	grep -q "\"protocol\":\"$2\"" "$out" || { tail -n 5 "$TB_DIR/$1.log" "$out" >&2; tb_fail "$1: no $2 result line"; }
	acc=$(tb_json "$out" test_accuracy)
	[ "$(echo "$acc > 0.6" | bc)" = 1 ] || tb_fail "$1: test accuracy $acc, expected > 0.6"
	tb_pass "$1: test accuracy $acc over $2, every node addressed by name"
}

# Each name NODE resolved is logged once, as "resolved NAME -> ADDRESS (SOURCE)".
check_resolved() { # NODE NAME ADDRESS SOURCE
	local log=$TB_DIR/$1.log n
	n=$(grep -cF "resolved $2 -> $3 ($4)" "$log")
	[ "$n" = 1 ] || { cat "$log" >&2; tb_fail "$1: 'resolved $2 -> $3 ($4)' logged $n times, expected once"; }
}

# 1. dpdk: flags + map of names (PS), TF_CONFIG of names + the map (worker)
tb_switch 2 || tb_fail "switch"
tb_node ps-dpdk 0 train --role ps --ps "$PS:47900" --workers "$W:47901" --endpoint-map "$MAP" \
	--protocol dpdk --model softmax
TF="{\"cluster\":{\"ps\":[\"$PS:47900\"],\"worker\":[\"$W:47901\"]},\"task\":{\"type\":\"worker\",\"index\":0}}"
TF_CONFIG=$TF TF_SEASTAR_ENDPOINT_MAP_PATH=$MAP timeout 60 "$TB_BUILD/wharf-train" $(tb_eal w-dpdk 1) -- \
	--protocol dpdk $TRAIN >"$TB_DIR/w-dpdk.out" 2>"$TB_DIR/w-dpdk.log" ||
	{ tail -n 8 "$TB_DIR/w-dpdk.log" "$TB_DIR/ps-dpdk.log" >&2; tb_fail "dpdk: worker failed"; }
"$TB_BUILD/wharf-ctl" "$PS:47900" shutdown >/dev/null 2>"$TB_DIR/ctl.log" || tb_fail "dpdk: wharf-ctl $PS:47900 shutdown"
grep -qF "resolved $PS -> 127.0.0.1 (HOST:PORT)" "$TB_DIR/ctl.log" || { cat "$TB_DIR/ctl.log" >&2; tb_fail "wharf-ctl did not log its resolution"; }
tb_stop ps-dpdk; tb_stop switch
check_worker w-dpdk dpdk
check_resolved ps-dpdk "$PS" 127.0.0.1 "--ps[0]"
check_resolved ps-dpdk "$PSD" 198.18.5.1 "$MAP, this node's data address"
check_resolved w-dpdk "$W" 127.0.0.1 "TF_CONFIG cluster.worker[0]"
check_resolved w-dpdk "$PS" 127.0.0.1 "TF_CONFIG cluster.ps[0]"
check_resolved w-dpdk "$PSD" 198.18.5.1 "$MAP, ps 0 data address"
check_resolved w-dpdk "$WD" 198.18.5.2 "$MAP, this node's data address"
tb_pass "dpdk: each node logged each name once; wharf-ctl took a name"

# 2. kernel: Paddle's variables name the server by name, POD_IP is its address
env PADDLE_PSERVERS_IP_PORT_LIST="$PS:47900" PADDLE_TRAINERS_NUM=1 TRAINING_ROLE=PSERVER \
	POD_IP=127.0.0.1 PADDLE_PORT=47900 WHARF_PROTOCOL=kernel \
	"$TB_BUILD/wharf-train" -- --model softmax >"$TB_DIR/ps-kernel.out" 2>"$TB_DIR/ps-kernel.log" &
TB_PIDS[ps-kernel]=$!
timeout 60 "$TB_BUILD/wharf-train" -- --role worker --ps "$PS:47900" --workers "$W:47901" \
	--protocol kernel $TRAIN >"$TB_DIR/w-kernel.out" 2>"$TB_DIR/w-kernel.log" ||
	{ tail -n 8 "$TB_DIR/w-kernel.log" "$TB_DIR/ps-kernel.log" >&2; tb_fail "kernel: worker failed"; }
"$TB_BUILD/wharf-ctl" "$PS:47900" shutdown >/dev/null 2>&1 || tb_fail "kernel: wharf-ctl shutdown"
tb_stop ps-kernel
check_worker w-kernel kernel
check_resolved ps-kernel "$PS" 127.0.0.1 "PADDLE_PSERVERS_IP_PORT_LIST[0]"
check_resolved w-kernel "$PS" 127.0.0.1 "--ps[0]"
tb_pass "kernel: the PSERVER found itself in a list of names"

# 3. a name nobody knows: refused, its source named
NO=nosuch.$TAG.test
"$TB_BUILD/wharf-train" -- --role worker --ps "$NO:47900" --num-workers 1 --protocol kernel \
	--wait-timeout 1 --retry-interval 1 >/dev/null 2>"$TB_DIR/bad.log"
rc=$?
[ $rc -eq 2 ] && grep -qF -- "--ps[0]: host name '$NO' does not resolve" "$TB_DIR/bad.log" ||
	{ cat "$TB_DIR/bad.log" >&2; tb_fail "unknown name: exit $rc"; }
tb_pass "unknown name refused: $(tail -n 1 "$TB_DIR/bad.log")"
"$TB_BUILD/wharf-ctl" "$NO:47900" health >/dev/null 2>"$TB_DIR/badctl.log"
rc=$?
[ $rc -eq 1 ] && grep -qF "HOST:PORT: host name '$NO' does not resolve" "$TB_DIR/badctl.log" ||
	{ cat "$TB_DIR/badctl.log" >&2; tb_fail "wharf-ctl unknown name: exit $rc"; }
tb_pass "wharf-ctl: unknown name refused (exit 1)"
