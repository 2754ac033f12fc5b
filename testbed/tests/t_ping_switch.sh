#!/usr/bin/env bash
# Two wharf nodes on the vswitch over virtio-user: 1000 pings, none lost, with hugepages
# and again with --no-huge (memfd), so both launcher paths run. On a machine without
# hugepages the --no-huge path still runs and the test exits 77 (skipped), not 0.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

run_mode() { # MODE COUNT
	tb_init "$1"
	tb_switch 2 || tb_fail "switch"
	tb_node resp 1 ping --ip 198.18.0.2/24
	sleep 1
	tb_run client 0 60 ping --ip 198.18.0.1/24 --peer 198.18.0.2 --count "$2" --interval-us 200 \
		|| { cat "$TB_DIR/client.log" >&2; tb_fail "$1: client exited non-zero"; }
	cat "$TB_DIR/client.out"
	local sent recv
	sent=$(tb_json "$TB_DIR/client.out" sent); recv=$(tb_json "$TB_DIR/client.out" received)
	[ "$sent" = "$2" ] && [ "$recv" = "$2" ] || tb_fail "$1: sent $sent received $recv of $2"
	tb_pass "$1: $recv/$sent replies, p50 $(tb_json "$TB_DIR/client.out" rtt_p50_us) us"
	tb_cleanup
}

mem=${WHARF_MEM:-$("$TB_ROOT/testbed/hugepages.sh")}
if [ "$mem" = huge ]; then
	run_mode huge 1000
else
	tb_skip "the hugepage path" "memory mode $mem (no hugepages: testbed/hugepages.sh, or WHARF_MEM)"
fi
run_mode no-huge 1000
