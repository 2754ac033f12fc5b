#!/usr/bin/env bash
# Each consistency mode end to end over protocol dpdk (1 PS + 2 workers on the switch): the
# dense softmax model in sync, async and GEO (the sparse CTR model: t_e2e_ctr.sh). Short runs with thresholds they reliably reach; the full-accuracy runs
# are `make demo` and testbed/e2e_full.sh.
set -u
. "$(dirname "$0")/../cluster/tb.sh"

tb_init
tb_train_cluster 47760
job() { tb_train_job 120 "$@"; }

D="--model softmax --epochs 2 --train-limit 12000 --test-limit 2000"
job sync sync test_accuracy 0.76 $D
job async async test_accuracy 0.72 $D
job geo geo test_accuracy 0.72 $D --geo-k 4
