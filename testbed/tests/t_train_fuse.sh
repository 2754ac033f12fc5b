#!/usr/bin/env bash
# The many-small-tensors model with Send/Recv fusion on, over protocol dpdk through the switch
# (1 PS + 2 workers): wharf-train's deep MLP (--layers 24: 50 dense tables, 100 small tensors
# a step) trains in sync and in async, and fused frames really carried several tensors each
# way: the workers' fuse counters (their last JSON line) show frames out of at least 8
# sub-messages on average and as many coming back from the PS, and the PS refused none.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
tb_train_cluster 47790
D="--model mlp --layers 24 --epochs 1 --train-limit 36000 --test-limit 2000 --decay-epochs 0 --tensor-fuse=true"

# fused MODE: the fuse counters of both workers of the job just run.
fused() {
	local i f out="" fo so fi si
	for i in 0 1; do
		f=$TB_DIR/w$i-$1.out
		fo=$(tb_json "$f" fuse_frames_out) so=$(tb_json "$f" fuse_subs_out)
		fi=$(tb_json "$f" fuse_frames_in) si=$(tb_json "$f" fuse_subs_in)
		[ "$(tb_json "$f" tensors)" = 50 ] || tb_fail "$1: worker $i trained $(tb_json "$f" tensors) tensors, not 50"
		[ "$fo" -gt 0 ] && [ "$so" -ge $((8 * fo)) ] ||
			tb_fail "$1: worker $i sent $fo fused frames carrying $so tensors (want >= 8 a frame)"
		[ "$fi" -gt 0 ] && [ "$si" -ge $((8 * fi)) ] ||
			tb_fail "$1: worker $i got $fi fused frames carrying $si tensors (want >= 8 a frame)"
		out="$out w$i: $so/$fo out, $si/$fi in;"
	done
	grep -q "refused 0" "$TB_DIR/$1-status.txt" || { cat "$TB_DIR/$1-status.txt" >&2; tb_fail "$1: the PS refused fused frames"; }
	tb_pass "$1: fused tensors/frames$out"
}

# Marks: sync reached 0.7535 in every run (deterministic), async 0.77-0.80 (281 steps).
TB_STATUS_OUT=$TB_DIR/sync-status.txt tb_train_job 90 sync sync test_accuracy 0.72 $D
fused sync
TB_STATUS_OUT=$TB_DIR/async-status.txt tb_train_job 90 async async test_accuracy 0.70 $D
fused async
