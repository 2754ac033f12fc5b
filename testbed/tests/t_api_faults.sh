#!/usr/bin/env bash
# libwharf's client through a PS crash: testbed/extern/ledger.c (built from the public header
# and the libraries) pushes from four threads sharing one client while its PS, serving with a
# checkpoint and write-ahead log, is killed with SIGKILL and started again. The client must
# reconnect on its own, resend what was not acknowledged, ask again what the lost connection
# owed, and end with every key holding exactly what was pushed; over kernel TCP and over dpdk
# (virtio-user through the switch). Then a PS that never comes back: every thread's call must
# fail (not hang) once the client's wait timeout passed, with the endpoint named.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48020
MAP=$TB_DIR/.endpoint_map
printf '127.0.0.1:%d=198.19.0.1:6666\n127.0.0.1:%d=198.19.0.2:5555\n' $B $((B + 1)) >"$MAP"
PROG=$TB_DIR/ledger
L=$TB_BUILD/lib
gcc -O2 -std=c11 -Wall -Wextra -Werror -I"$TB_ROOT/include" "$TB_ROOT/testbed/extern/ledger.c" \
	-o "$PROG" "$L/libwharf.a" $(pkg-config --libs libdpdk numa jansson) -lrte_net_vhost -lz -lm -lpthread ||
	tb_fail "ledger does not build"

# The PS has answered N requests (its status's "server requests"): the worker is under way.
wait_served() { # N SECS
	local n
	for _ in $(seq 1 $(( $2 * 10 ))); do
		n=$("$TB_BUILD/wharf-ctl" 127.0.0.1:$B status 2>/dev/null | sed -nE 's/^server requests ([0-9]+) .*/\1/p')
		[ "${n:-0}" -ge "$1" ] && return 0
		sleep 0.1
	done
	return 1
}

start_ps() { # PROTO GEN
	WHARF_EAL_ARGS="$(tb_eal ps-$1-$2 0)" "$PROG" --role ps $CL -- "$TB_DIR/ck-$1" \
		>>"$TB_DIR/ps-$1.out" 2>>"$TB_DIR/ps-$1.log" &
	TB_PIDS[ps]=$!
}

# Killed once the PS answered a quarter of the worker's 4 x ROUNDS pushes: 3/4 of them are
# pushed after the restart, through the reconnect and the resend.
run() { # PROTO ROUNDS
	local proto=$1 rounds=$2 line
	CL="--ps 127.0.0.1:$B --workers 127.0.0.1:$((B + 1)) --endpoint-map $MAP --protocol $proto"
	CL="$CL --mode async --wait-timeout 30 --retry-interval 1"
	if [ "$proto" = dpdk ]; then tb_switch 2 || tb_fail "switch"; fi
	start_ps "$proto" 1
	tb_wait_log "$TB_DIR/ps-$proto.log" "ps 0 serving" 20 || { cat "$TB_DIR/ps-$proto.log" >&2; tb_fail "$proto: PS did not start"; }
	WHARF_EAL_ARGS="$(tb_eal w-$proto 1)" timeout 120 "$PROG" --role worker $CL -- "$rounds" \
		>"$TB_DIR/w-$proto.out" 2>"$TB_DIR/w-$proto.log" &
	TB_PIDS[w]=$!
	wait_served "$rounds" 20 || { cat "$TB_DIR/w-$proto.out" "$TB_DIR/w-$proto.log" >&2; tb_fail "$proto: the worker did not get under way"; }
	kill -0 "${TB_PIDS[w]}" 2>/dev/null || { cat "$TB_DIR/w-$proto.out" "$TB_DIR/w-$proto.log" >&2; tb_fail "$proto: the worker ended before the crash (make ROUNDS larger)"; }
	kill -KILL "${TB_PIDS[ps]}"; wait "${TB_PIDS[ps]}" 2>/dev/null
	rm -f /dev/hugepages/wharf-$TB_ID-ps-$proto-1* 2>/dev/null
	tb_log "$proto: PS killed mid-run; restarting it in 1 s"
	sleep 1
	start_ps "$proto" 2
	wait "${TB_PIDS[w]}"; local rc=$?
	unset "TB_PIDS[w]"
	line=$(grep "^ledger: worker" "$TB_DIR/w-$proto.out")
	[ $rc -eq 0 ] || { cat "$TB_DIR/w-$proto.out" >&2; tail -5 "$TB_DIR/w-$proto.log" "$TB_DIR/ps-$proto.log" >&2; tb_fail "$proto: ledger not exact after the crash (exit $rc)"; }
	grep -qE "[1-9][0-9]* reconnects" <<<"$line" || { echo "$line" >&2; tb_fail "$proto: the client never reconnected"; }
	grep -q "restored from" "$TB_DIR/ps-$proto.log" || tb_fail "$proto: the PS did not recover"
	tb_pass "$proto: ${line#ledger: }"
	tb_stop ps
	if [ "$proto" = dpdk ]; then tb_stop switch; fi
}

run kernel 20000
run dpdk 10000

# A PS that does not come back: the client gives up after --wait-timeout 3.
CL="--ps 127.0.0.1:$B --num-workers 1 --protocol kernel --mode async --wait-timeout 3 --retry-interval 1"
rm -f "$TB_DIR/ck-kernel" && rm -rf "$TB_DIR/ck-kernel.wal"
"$PROG" --role ps $CL >"$TB_DIR/ps-lone.out" 2>"$TB_DIR/ps-lone.log" &
TB_PIDS[ps]=$!
tb_wait_log "$TB_DIR/ps-lone.log" "ps 0 serving" 20 || { cat "$TB_DIR/ps-lone.log" >&2; tb_fail "PS did not start"; }
"$PROG" --role worker $CL -- 1000000 >"$TB_DIR/lone.out" 2>"$TB_DIR/lone.log" &
TB_PIDS[w]=$!
wait_served 1000 20 || { cat "$TB_DIR/lone.log" >&2; tb_fail "the worker did not get under way"; }
kill -KILL "${TB_PIDS[ps]}"; wait "${TB_PIDS[ps]}" 2>/dev/null; unset "TB_PIDS[ps]"
t0=$(date +%s)
for _ in $(seq 1 300); do kill -0 "${TB_PIDS[w]}" 2>/dev/null || break; sleep 0.1; done
kill -0 "${TB_PIDS[w]}" 2>/dev/null && { tail -5 "$TB_DIR/lone.log" >&2; tb_fail "the client still waits 30 s after its PS died for good"; }
wait "${TB_PIDS[w]}"; rc=$?; unset "TB_PIDS[w]"
[ $rc -ne 0 ] || tb_fail "the worker claimed success without its PS"
n=$(grep -c "^ledger: thread .*127.0.0.1:$B" "$TB_DIR/lone.log")
[ "$n" -eq 4 ] || { cat "$TB_DIR/lone.log" >&2; tb_fail "$n of 4 threads' failures name the PS"; }
tb_pass "a PS gone for good: all 4 threads' calls failed after $(( $(date +%s) - t0 )) s: $(grep -m1 '^ledger: thread' "$TB_DIR/lone.log" | cut -c1-200)"
