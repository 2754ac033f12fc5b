#!/usr/bin/env bash
# Send/Recv fusion over the switch with impairments: two wharf nodes (protocol dpdk,
# TCP-lite on virtio-user) and a switch that drops 2%, reorders 2% and duplicates 1% of
# the frames (seeded). The client sends a random mixed stream with fusion on — small
# tensors fused into frames, large ones (up to 60 KiB) alone, zero copy, in between —
# one acknowledged step at a time. The server checks every tensor (request ids
# consecutive, body bytes and length as made); the test passes when every tensor arrived
# intact and in order, fusion really happened, and neither side saw an error.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

STEPS=${FUSE_STEPS:-150}
tb_init
tb_switch 2 --loss 0.02 --reorder 0.02 --dup 0.01 --seed 11 || tb_fail "switch"
tb_node srv 1 fuse-bench --server --ip 198.18.0.2/24 --port 7300
tb_wait_log "$TB_DIR/srv.log" "server on ports" 20 || { cat "$TB_DIR/srv.log" >&2; tb_fail "server did not start"; }
tb_run cli 0 150 fuse-bench --peer 198.18.0.2 --ip 198.18.0.1/24 --port 7300 \
	--mode verify --steps "$STEPS" --seed 3
rc=$?
cat "$TB_DIR/cli.out"
[ $rc -eq 0 ] || { tail -n 20 "$TB_DIR/cli.log" >&2; tb_fail "client exited $rc"; }
tb_stop srv
tb_stop switch
cat "$TB_DIR/switch.out" >&2
out=$TB_DIR/cli.out
grep -q '"ok":true' "$out" || tb_fail "client says the stream did not arrive intact"
sent=$(tb_json "$out" tensors); got=$(tb_json "$out" server_tensors)
fused=$(tb_json "$out" fused); alone=$(tb_json "$out" alone); frames=$(tb_json "$out" frames)
[ "$sent" = "$got" ] || tb_fail "sent $sent tensors, server saw $got"
[ "$fused" -gt 0 ] && [ "$frames" -gt 0 ] || tb_fail "no fusion happened (fused $fused, frames $frames)"
[ "$alone" -gt 0 ] || tb_fail "no message went alone (large ones must)"
grep -q '"errors":0' "$TB_DIR/srv.out" || { cat "$TB_DIR/srv.out" "$TB_DIR/srv.log" >&2; tb_fail "server saw errors"; }
lost=$(grep -o '"lost":[0-9]*' "$TB_DIR/switch.out" | cut -d: -f2 | paste -sd+ | bc)
[ "${lost:-0}" -gt 0 ] || tb_fail "the switch dropped nothing: impairments not in effect"
tb_pass "$sent tensors ($fused fused into $frames frames, $alone alone) intact and in order over loss/reorder/dup (switch lost $lost frames)"
