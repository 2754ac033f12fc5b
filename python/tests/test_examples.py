"""A short PyTorch training run of each example (python/examples) as written: a PS and two
workers, each its own process, to a looser mark than the full runs' (MLP test accuracy 0.87,
CTR AUC within 0.01 of Bayes): the Fashion-MNIST MLP in sync mode over DPDK, the CTR model in
async mode over kernel TCP."""
import json
import os
import sys

import pytest

from conftest import ROOT, Proc, cluster_flags, eal, need_protocol

EXAMPLES = os.path.join(ROOT, "python", "examples")


def run_job(name, script, protocol, mode, args, timeout=120):
    """PS + 2 workers of script (switch ports 2, 3, 4 on DPDK); the workers' JSON results."""
    need_protocol(protocol)
    if protocol == "dpdk" and not eal(4):
        pytest.skip("dpdk: the testbed gave no switch ports for the examples")
    flags = cluster_flags(protocol, mode, 2, 2, 3)
    argv = [sys.executable, os.path.join(EXAMPLES, script)] + flags + args
    dp = protocol == "dpdk"
    ps = Proc(name + "-ps", argv + ["--role", "ps"], eal(2) if dp else None)
    ws = [Proc("%s-w%d" % (name, i), argv + ["--role", "worker", "--task-index", str(i)],
               eal(3 + i) if dp else None) for i in range(2)]
    try:
        for w in ws:
            w.p.wait(timeout)
    finally:
        codes = [w.stop(timeout=10) for w in ws]
        ps_code = ps.stop()
    logs = "\n".join("---- %s\n%s" % (p.name, p.text()[-3000:]) for p in [ps] + ws)
    assert codes == [0, 0] and ps_code == 0, "exit codes %s, PS %s\n%s" % (codes, ps_code, logs)
    results = []
    for w in ws:
        lines = [ln for ln in w.text().splitlines() if ln.startswith("{")]
        assert lines, "no JSON result\n" + logs
        results.append(json.loads(lines[-1]))
    return results


def test_mlp_fmnist_sync_over_dpdk():
    r = run_job("mlp", "mlp_fmnist.py", "dpdk", "sync",
                ["--epochs", "3", "--train-limit", "12000", "--test-limit", "2000",
                 "--decay-epochs", "0"])
    for x in r:
        assert x["protocol"] == "dpdk" and x["mode"] == "sync" and x["framework"] == "pytorch"
    # sync: both workers end with the same model
    assert r[0]["test_accuracy"] == r[1]["test_accuracy"]
    assert r[0]["test_accuracy"] >= 0.74, r


def test_ctr_async_over_kernel():
    r = run_job("ctr", "ctr.py", "kernel", "async", ["--samples", "120000", "--epochs", "2"])
    for x in r:  # each evaluated the model after its own last push
        assert x["protocol"] == "kernel" and x["mode"] == "async"
        assert x["auc_gap"] <= 0.035, r
