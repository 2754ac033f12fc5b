#!/usr/bin/env bash
# libwharf from a program outside the tree: testbed/extern/two_tables.c (its own two-table
# model, one sparse and one dense, built from include/wharf/wharf.h and the library alone)
# serves as ps and trains as two workers of four application threads each sharing one
# client, over protocol dpdk (virtio-user through the switch) and kernel. Each worker must
# reach a held-out accuracy of 0.9; the PS must have served the two workers' calls.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
B=48010
tb_train_map $B
MAP=$TB_TRAIN_MAP
PROG=$TB_DIR/two_tables

# Built as a user would: the public header and the library, nothing else of the tree. With
# WHARF_PKG_CONFIG_PATH (t_install.sh: a make install prefix), from pkg-config alone against
# the installed shared libwharf, which the processes load (LD_LIBRARY_PATH there); else from
# the tree's include/ and build/lib/libwharf.a.
if [ -n "${WHARF_PKG_CONFIG_PATH:-}" ]; then
	export PKG_CONFIG_PATH=$WHARF_PKG_CONFIG_PATH
	gcc -O2 -std=c11 -Wall -Wextra -Werror "$TB_ROOT/testbed/extern/two_tables.c" -o "$PROG" \
		$(pkg-config --cflags --libs wharf) -lm -pthread ||
		tb_fail "two_tables does not build against the installed library"
	so=$(ldd "$PROG" | awk '$1 ~ /^libwharf\.so/ { print $3 }')
	[ "$so" = "$(pkg-config --variable=libdir wharf)/$(readelf -d "$PROG" | sed -nE 's/.*NEEDED.*\[(libwharf\.so[^]]*)\].*/\1/p')" ] ||
		tb_fail "two_tables does not load the installed libwharf.so (ldd: ${so:-none})"
	tb_log "two_tables built with pkg-config --cflags --libs wharf, loads $so"
else
	gcc -O2 -std=c11 -Wall -Wextra -Werror -I"$TB_ROOT/include" \
		"$TB_ROOT/testbed/extern/two_tables.c" -o "$PROG" "$TB_BUILD/lib/libwharf.a" \
		$(pkg-config --libs libdpdk numa jansson) -lrte_net_vhost -lz -lm -lpthread ||
		tb_fail "two_tables does not build"
fi

run_job() { # PROTO
	local proto=$1 cl k acc
	cl="--ps 127.0.0.1:$B --workers 127.0.0.1:$((B + 1)),127.0.0.1:$((B + 2)) --endpoint-map $MAP"
	cl="$cl --protocol $proto --mode async --wait-timeout 30 --retry-interval 1"
	if [ "$proto" = dpdk ]; then tb_switch 3 || tb_fail "switch"; fi
	WHARF_EAL_ARGS="$(tb_eal ps-$proto 0)" "$PROG" --role ps $cl \
		>"$TB_DIR/ps-$proto.out" 2>"$TB_DIR/ps-$proto.log" &
	TB_PIDS[ps]=$!
	for k in 0 1; do
		WHARF_EAL_ARGS="$(tb_eal w$k-$proto $((k + 1)))" timeout 120 "$PROG" --role worker \
			--task-index $k $cl >"$TB_DIR/w$k-$proto.out" 2>"$TB_DIR/w$k-$proto.log" &
		TB_PIDS[w$k]=$!
	done
	for k in 0 1; do
		wait "${TB_PIDS[w$k]}" ||
			{ tail -5 "$TB_DIR/w$k-$proto.log" "$TB_DIR/ps-$proto.log" >&2; cat "$TB_DIR/w$k-$proto.out" >&2;
			  tb_fail "$proto: worker $k failed"; }
		unset "TB_PIDS[w$k]"
		acc=$(sed -nE 's/.*held-out accuracy ([0-9.]+).*/\1/p' "$TB_DIR/w$k-$proto.out")
		grep -q "4 threads" "$TB_DIR/w$k-$proto.out" || tb_fail "$proto: worker $k did not train from 4 threads"
		tb_pass "$proto: worker $k: $(sed -E 's/^two_tables: //' "$TB_DIR/w$k-$proto.out")"
		[ -n "$acc" ] || tb_fail "$proto: worker $k printed no accuracy"
	done
	tb_stop ps
	grep -qE "ps 0 stopped after [0-9]{4,} requests \(0 errors" "$TB_DIR/ps-$proto.log" ||
		{ tail -3 "$TB_DIR/ps-$proto.log" >&2; tb_fail "$proto: the PS did not serve the workers cleanly"; }
	if [ "$proto" = dpdk ]; then tb_stop switch; fi
}

run_job dpdk
run_job kernel
