#!/usr/bin/env bash
# Exactly once under overload, reconnects and a stalled server.
#
# 1. Overload: a PS of 4 reply buffers (--reply-buffers 4) under 2 worker processes x 4 threads
#    x 16 pipelined pushes each (testbed/extern/ledger.c over libwharf). It runs out of reply
#    buffers all the time and stops reading the connections that ask for more until its
#    replies are sent (back-pressure); nothing is refused, and the exactly-once ledger must be
#    exact: lost 0, doubled 0. Over kernel TCP and over dpdk (virtio-user through the switch:
#    there a paused connection's TCP window stays shut).
# 2. Reconnects: a wharf-ps-bench worker (the C client path trainers use) with 3 request slots
#    while its PS is killed and restarted 4 times in its pull phase, each time with a pull in
#    flight: what the lost connection owed is let go (its slot free again), so the worker never
#    runs out of slots and finishes both phases. Then the PS is stopped (SIGSTOP) past another
#    worker's --request-timeout 1: it gives the connection up, reconnects once the PS runs
#    again, and finishes.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48660
tb_train_map $B
MAP=$TB_TRAIN_MAP
PROG=$TB_DIR/ledger
L=$TB_BUILD/lib
gcc -O2 -std=c11 -Wall -Wextra -Werror -I"$TB_ROOT/include" "$TB_ROOT/testbed/extern/ledger.c" \
	-o "$PROG" "$L/libwharf.a" $(pkg-config --libs libdpdk numa jansson) -lrte_net_vhost -lz -lm -lpthread ||
	tb_fail "ledger does not build"

overload() { # PROTO ROUNDS
	local proto=$1 rounds=$2 w rc line st deferred
	local cl="--ps 127.0.0.1:$B --workers 127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2))"
	cl="$cl --endpoint-map $MAP --protocol $proto --mode async --wait-timeout 30 --retry-interval 1"
	if [ "$proto" = dpdk ]; then tb_switch 3 || tb_fail "switch"; fi
	WHARF_EAL_ARGS="$(tb_eal ps-$proto 0)" "$PROG" --role ps $cl --reply-buffers 4 \
		>"$TB_DIR/ps-$proto.out" 2>"$TB_DIR/ps-$proto.log" &
	TB_PIDS[ps]=$!
	tb_wait_log "$TB_DIR/ps-$proto.log" "ps 0 serving" 20 || { cat "$TB_DIR/ps-$proto.log" >&2; tb_fail "$proto: PS did not start"; }
	for w in 0 1; do
		WHARF_EAL_ARGS="$(tb_eal w$w-$proto $((w + 1)))" timeout 120 "$PROG" --role worker $cl \
			--task-index $w -- "$rounds" 16 >"$TB_DIR/w$w-$proto.out" 2>"$TB_DIR/w$w-$proto.log" &
		TB_PIDS[w$w]=$!
	done
	for w in 0 1; do
		wait "${TB_PIDS[w$w]}"; rc=$?
		unset "TB_PIDS[w$w]"
		line=$(grep "^ledger: worker" "$TB_DIR/w$w-$proto.out")
		[ $rc -eq 0 ] || { cat "$TB_DIR/w$w-$proto.out" >&2; tail -5 "$TB_DIR/w$w-$proto.log" >&2; tb_fail "$proto: worker $w: ledger not exact under overload (exit $rc)"; }
		tb_pass "$proto: ${line#ledger: }"
	done
	st=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status) || tb_fail "$proto: no status from the PS"
	deferred=$(sed -nE 's/^server .* errors ([0-9]+) .* deferred ([0-9]+) .*/\1 \2/p' <<<"$st")
	[ -n "$deferred" ] || { echo "$st" >&2; tb_fail "$proto: the status has no deferred count"; }
	[ "${deferred% *}" = 0 ] || { echo "$st" >&2; tb_fail "$proto: the PS refused requests (errors ${deferred% *})"; }
	[ "${deferred#* }" -gt 0 ] || { echo "$st" >&2; tb_fail "$proto: the PS never ran out of reply buffers (make the load larger)"; }
	tb_pass "$proto: the PS deferred ${deferred#* } requests for want of a reply buffer and refused 0"
	tb_stop ps
	if [ "$proto" = dpdk ]; then tb_stop switch; fi
}

overload kernel 150
overload dpdk 40

# 2. Reconnects and a stall, on the C client path (wharf-ps-bench uses the fleet API). The PS
# keeps no checkpoint: each restart is a new state the workers take as it is (pulls only).
CL="--ps 127.0.0.1:$B --num-workers 1 --protocol kernel --mode async --wait-timeout 30 --retry-interval 1"
CL="$CL --ps-lost-state continue"
start_ps() { # GEN
	"$TB_BUILD/wharf-ps-bench" -- $CL --role ps >"$TB_DIR/bps$1.out" 2>"$TB_DIR/bps$1.log" &
	TB_PIDS[ps]=$!
	tb_wait_log "$TB_DIR/bps$1.log" "serving" 20 || { cat "$TB_DIR/bps$1.log" >&2; tb_fail "ps-bench server $1 did not start"; }
}
reconnects() { grep -c "reconnected to ps 0" "$TB_DIR/bw.log" 2>/dev/null; }

start_ps 0
timeout 90 "$TB_BUILD/wharf-ps-bench" -- $CL --role worker --request-slots 3 --seconds 5 \
	--batch 64 --keys 20000 >"$TB_DIR/bw.out" 2>"$TB_DIR/bw.log" &
TB_PIDS[bw]=$!
tb_wait_log "$TB_DIR/bw.log" "connected to" 20 || { cat "$TB_DIR/bw.log" >&2; tb_fail "ps-bench worker did not connect"; }
sleep 0.5
for k in 1 2 3 4; do
	kill -KILL "${TB_PIDS[ps]}"; wait "${TB_PIDS[ps]}" 2>/dev/null
	start_ps "$k"
	for _ in $(seq 1 50); do [ "$(reconnects)" -ge "$k" ] && break; sleep 0.1; done
	[ "$(reconnects)" -ge "$k" ] || { tail -5 "$TB_DIR/bw.log" >&2; tb_fail "the worker did not reconnect after kill $k"; }
	sleep 0.3 # pulls in flight again
done
wait "${TB_PIDS[bw]}"; rc=$?
unset "TB_PIDS[bw]"
[ $rc -eq 0 ] || { tail -5 "$TB_DIR/bw.log" >&2; tb_fail "the worker failed (exit $rc) after 4 reconnects with 3 request slots"; }
tb_pass "4 PS kills in the pull phase, each with a pull in flight, 3 request slots: the worker finished, pull $(tb_json "$TB_DIR/bw.out" pull_keys_per_s) keys/s, push $(tb_json "$TB_DIR/bw.out" push_keys_per_s) keys/s"

# A stall: the PS stops answering (and health with it) past the worker's request timeout.
timeout 60 "$TB_BUILD/wharf-ps-bench" -- $CL --role worker --request-timeout 1 --seconds 2 \
	--batch 64 --keys 20000 >"$TB_DIR/bs.out" 2>"$TB_DIR/bs.log" &
TB_PIDS[bs]=$!
tb_wait_log "$TB_DIR/bs.log" "connected to" 20 || { cat "$TB_DIR/bs.log" >&2; tb_fail "ps-bench worker did not connect"; }
sleep 0.5
kill -STOP "${TB_PIDS[ps]}"
tb_wait_log "$TB_DIR/bs.log" "answered nothing for 1 s" 10 || { kill -CONT "${TB_PIDS[ps]}"; tail -5 "$TB_DIR/bs.log" >&2; tb_fail "no request timeout while the PS was stopped"; }
sleep 1
kill -CONT "${TB_PIDS[ps]}"
wait "${TB_PIDS[bs]}"; rc=$?
unset "TB_PIDS[bs]"
[ $rc -eq 0 ] || { tail -8 "$TB_DIR/bs.log" >&2; tb_fail "the worker failed (exit $rc) after a stall"; }
grep -q "reconnected to ps 0" "$TB_DIR/bs.log" || { tail -5 "$TB_DIR/bs.log" >&2; tb_fail "the stalled connection was not made again"; }
tb_pass "the worker gave the stopped PS up after its request timeout (1 s), reconnected and finished"
tb_stop ps
