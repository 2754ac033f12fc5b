#!/usr/bin/env bash
# The sparse CTR model end to end over protocol dpdk (1 PS + 2 workers on the switch): LR over
# hashed ids on a sparse table, async, judged against the generator's Bayes AUC (looser than
# the full run's 0.01: this run is about 3x shorter). It once stalled in the evaluation's many
# 50 KB pulls: virtio never freed the sent mbufs on a quiet link, so zero-copy replies never
# completed (dpdk_net now reclaims them on an idle lcore).
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
tb_train_cluster 47780
job() { tb_train_job 60 "$@"; }

job ctr-lr async test_auc 0.70 --model lr --ctr-samples 100000 --epochs 2
# the CTR gap to Bayes, looser than the full run's 0.01 because the run is 3x shorter
gap=$(tb_json "$(ls -t "$TB_DIR"/w[01]-ctr-lr.out | head -n 1)" auc_gap) # the last worker to finish
[ "$(echo "$gap" | awk '{print ($1 <= 0.05)}')" = 1 ] || tb_fail "ctr-lr: AUC gap to Bayes $gap > 0.05"
tb_pass "ctr-lr: AUC gap to Bayes $gap"
