"""Fixtures of the Python tests: real wharf servers (python/tests/ps_node.py, a Python
process running wharf.run_server) on kernel TCP or DPDK, this pytest process as their worker.

testbed/tests/t_python.sh runs them with the virtual testbed set up: WHARF_TEST_DIR (logs,
.endpoint_map), WHARF_TEST_BASE_PORT (control ports from there) and WHARF_TEST_EAL_0..4 (the
EAL arguments of switch ports 0..4: 0 the tests' PS, 1 this process, 2-4 the examples').
"""
import ctypes
import itertools
import os
import signal
import subprocess
import sys
import time

import pytest

import wharf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DIR = os.environ.get("WHARF_TEST_DIR", "/tmp")
_ports = itertools.count(int(os.environ.get("WHARF_TEST_BASE_PORT", "47900")), 4)
_maps = itertools.count()


def eal(port):
    """The EAL arguments of switch port `port`, or None when the testbed set none."""
    return os.environ.get("WHARF_TEST_EAL_%d" % port)


def cluster_flags(protocol, mode, workers, ps_port_idx, worker_port_idx):
    """Flags of a 1 PS + `workers` cluster on fresh control ports; on DPDK, an .endpoint_map
    with the data addresses of the switch ports (PS at ps_port_idx, worker i at
    worker_port_idx + i)."""
    base = next(_ports)
    ps = "127.0.0.1:%d" % base
    ws = ["127.0.0.1:%d" % (base + 1 + i) for i in range(workers)]
    path = os.path.join(DIR, "endpoint_map.%d" % next(_maps))
    with open(path, "w") as f:
        f.write("%s=198.19.0.%d:6666\n" % (ps, ps_port_idx + 1))
        for i, w in enumerate(ws):
            f.write("%s=198.19.0.%d:5555\n" % (w, worker_port_idx + i + 1))
    return ["--ps", ps, "--workers", ",".join(ws), "--endpoint-map", path, "--protocol", protocol,
            "--mode", mode, "--wait-timeout", "30", "--retry-interval", "1"]


def _die_with_parent():
    """In the child before exec: SIGTERM when pytest dies (a crash skips the teardown)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Proc:
    """A child process with its output in DIR/name.log, ended at teardown (or when pytest
    dies)."""

    def __init__(self, name, argv, eal_args=None):
        env = dict(os.environ)
        if eal_args:
            env["WHARF_EAL_ARGS"] = eal_args
        self.name = name
        self.log = os.path.join(DIR, name + ".log")
        self.out = open(self.log, "w")
        self.p = subprocess.Popen(argv, stdout=self.out, stderr=subprocess.STDOUT, env=env,
                                  cwd=ROOT, preexec_fn=_die_with_parent)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Sends sig, waits; the exit status (killed after timeout: None)."""
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                return None
        self.out.close()
        return self.p.returncode


def need_protocol(protocol):
    if protocol == "dpdk" and not (eal(0) and eal(1)):
        pytest.skip("dpdk: no testbed switch (run by testbed/tests/t_python.sh)")


# Every (protocol, mode) the round trips run over; one job at a time in this process.
JOBS = [(p, m) for p in ("kernel", "dpdk") for m in ("sync", "async", "geo")]


@pytest.fixture(scope="session", params=JOBS, ids=["%s-%s" % j for j in JOBS])
def job(request):
    """A PS (switch port 0) in this protocol and mode, this process its only worker (port 1);
    yields the declared PyTorch modules (tables.declare)."""
    protocol, mode = request.param
    need_protocol(protocol)
    import tables
    flags = cluster_flags(protocol, mode, 1, 0, 1)
    ps = Proc("ps-%s-%s" % (protocol, mode),
              [sys.executable, os.path.join(HERE, "ps_node.py"), "--role", "ps"] + flags,
              eal(0) if protocol == "dpdk" else None)
    try:
        # The library's own line: its endpoints listen (ps_node.py's comes before run_server,
        # and a worker that asks then is told to retry in --retry-interval's 1 s).
        assert wait_for(lambda: "ps 0 serving" in ps.text(), 30), "the PS did not start"
        wharf.init(flags + ["--role", "worker", "--task-index", "0"],
                   eal=eal(1) if protocol == "dpdk" else None)
        mods = tables.declare()
        wharf.init_worker()
    except Exception:
        wharf.stop()
        ps.stop()
        print(ps.text(), file=sys.stderr)
        raise
    _current["job"] = {"protocol": protocol, "mode": mode, "modules": mods, "ps": ps}
    yield _current["job"]
    _current.clear()
    wharf.stop()
    rc = ps.stop()
    assert rc == 0, "the PS did not stop cleanly on SIGTERM (%s):\n%s" % (rc, ps.text())


_current = {}


def apply_pushes():
    """Makes the pushes so far visible as the mode does: sync applies a step's pushes at its
    barrier (step numbers shared with the job's DenseSync), async and GEO at once."""
    if wharf.mode() == "sync":
        ps = _current["job"]["modules"][2]
        wharf.barrier(wharf.step())
        ps.steps += 1


@pytest.fixture
def applied(job):
    return apply_pushes


def expected(before, grad, lr):
    """A row after one push of grad: GEO adds the delta, the others take an SGD step."""
    return before + grad if wharf.mode() == "geo" else before - lr * grad


_keys = itertools.count(1 << 40)


@pytest.fixture
def fresh_keys():
    """n keys no test used before (the PS keeps its rows across tests)."""
    import numpy as np

    def make(n):
        return np.array([next(_keys) for _ in range(n)], dtype=np.uint64)
    return make


def wait_for(pred, secs=10.0):
    t0 = time.time()
    while time.time() - t0 < secs:
        if pred():
            return True
        time.sleep(0.05)
    return False


def next_port():
    """A control port no other cluster of this run uses."""
    return next(_ports)


def pytest_configure(config):
    config.addinivalue_line("markers", "modes(*names): run only in the jobs of these modes")
    config.addinivalue_line("markers", "protocols(*names): run only in the jobs of these "
                            "protocols")


def pytest_collection_modifyitems(config, items):
    """A test marked modes(...) or protocols(...) runs in the jobs of those modes or protocols
    only (deselected, not skipped, elsewhere: it does not apply there)."""
    keep, drop = [], []
    for it in items:
        spec = getattr(it, "callspec", None)
        job = spec.params["job"] if spec is not None and "job" in spec.params else None
        off = False
        for name, i in (("modes", 1), ("protocols", 0)):
            marker = it.get_closest_marker(name)
            off = off or (marker is not None and job is not None and job[i] not in marker.args)
        (drop if off else keep).append(it)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
