"""Each bad input is refused with an exception naming the argument (TypeError, ValueError) or
the cause (wharf.ConfigError for a bad flag, variable, file or table; wharf.TimeoutError for
servers that did not come up; wharf.Error for a request the servers refused), and the library
is left usable."""
import errno
import time

import numpy as np
import pytest

import wharf
from wharf import _wharf
from conftest import next_port, wait_for

K3 = np.array([1, 2, 3], np.uint64)


def refused(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match):
        fn(*args, **kw)


@pytest.mark.modes("async")
@pytest.mark.parametrize("bad, exc, match", [
    (K3.astype(np.int64), TypeError, r"keys: expected dtype uint64, got int64"),
    (K3.astype(np.uint32), TypeError, r"keys: expected dtype uint64, got uint32"),
    ([1, 2, 3], TypeError, r"keys: expected a NumPy uint64 array .* got list"),
    (np.arange(6, dtype=np.uint64)[::2], ValueError, r"keys: expected a C-contiguous array"),
    (K3.reshape(3, 1), ValueError, r"keys: expected a 1-D array, got shape \(3, 1\)"),
    (np.array(3, np.uint64), ValueError, r"keys: expected a 1-D array, got shape \(\)"),
    (K3.astype(">u8"), ValueError, r"keys: expected native byte order"),
])
def test_bad_keys(job, bad, exc, match):
    refused(exc, match, wharf.table("emb").pull, bad)
    refused(exc, match, wharf.table("emb").push, bad, np.zeros((3, 4), np.float32))
    refused(exc, match, wharf.table("emb").pull_async, bad, np.zeros((3, 4), np.float32))


def _ro():
    a = np.zeros((3, 4), np.float32)
    a.setflags(write=False)
    return a


@pytest.mark.modes("async")
@pytest.mark.parametrize("bad, exc, match", [
    (np.zeros((3, 4)), TypeError, r"out: expected dtype float32, got float64"),
    (np.zeros((3, 5), np.float32), ValueError, r"out: expected shape \(3, 4\).* got \(3, 5\)"),
    (np.zeros(12, np.float32), ValueError, r"out: expected shape \(3, 4\).* got \(12,\)"),
    (np.zeros((4, 3), np.float32).T, ValueError, r"out: expected a C-contiguous array"),
    (_ro(), ValueError, r"out: the array is read-only"),
    (b"x" * 48, TypeError, r"out: expected dtype float32, got uint8"),
])
def test_bad_out(job, bad, exc, match):
    emb = wharf.table("emb")
    refused(exc, match, emb.pull, K3, out=bad)
    refused(exc, match, emb.pull_async, K3, out=bad)


@pytest.mark.modes("async")
@pytest.mark.parametrize("bad, exc, match", [
    (np.zeros((3, 4), np.float64), TypeError, r"grads: expected dtype float32, got float64"),
    (np.zeros((2, 4), np.float32), ValueError, r"grads: expected shape \(3, 4\)"),
    ("grads", TypeError, r"grads: expected a NumPy float32 array .* got str"),
])
def test_bad_grads(job, bad, exc, match):
    emb = wharf.table("emb")
    refused(exc, match, emb.push, K3, bad)
    refused(exc, match, emb.push_async, K3, bad)
    refused(exc, match, emb.push_pull, K3, bad)


@pytest.mark.modes("async")
def test_out_overlapping_keys_or_part_of_grads_is_refused(job, fresh_keys):
    emb = wharf.table("emb")
    mem = np.zeros(32, np.uint64)
    mem[:3] = fresh_keys(3)
    keys, f = mem[:3], mem.view(np.float32)  # keys are f[0:6]
    for out in (f[:12], f[4:16], f[5:17]):
        refused(ValueError, r"out: overlaps keys$", emb.pull, keys, out=out.reshape(3, 4))
        refused(ValueError, r"out: overlaps keys$", emb.pull_async, keys, out=out.reshape(3, 4))
    got = emb.pull(keys, out=f[6:18].reshape(3, 4))  # just past the keys: fine
    assert np.shares_memory(got, mem) and not got.any()
    g = -np.ones((4, 4), np.float32)
    for grads, out in ((g[:3], g[1:]), (g[1:], g[:3])):
        refused(ValueError, r"out: overlaps grads \(it may be that array itself",
                emb.push_pull, keys, grads, out=out)
    refused(ValueError, r"out: overlaps keys", emb.push_pull, keys, g[:3],
            out=f[:12].reshape(3, 4))
    assert not emb.pull(keys).any()  # nothing refused was sent
    new = emb.push_pull(keys, g[:3], out=g[:3])  # out is grads itself: the rows after the push
    assert new is not None and np.shares_memory(new, g)
    assert np.array_equal(g[:3], emb.pull(keys)) and g[:3].any() and (g[3] == -1).all()


@pytest.mark.modes("async")
def test_bad_dense_arrays(job):
    w = wharf.table("w")
    refused(ValueError, r"out: expected 15 floats .*3 rows x 5.* got shape \(16,\)", w.pull,
            out=np.zeros(16, np.float32))
    refused(ValueError, r"grads: expected 15 floats", w.push, np.zeros((5, 3, 2), np.float32))
    refused(TypeError, r"grads: expected dtype float32, got int32", w.push_async,
            np.zeros(15, np.int32))


@pytest.mark.modes("async")
def test_wrong_table_kind_and_id(job):
    c = wharf.init_worker()
    w, emb = wharf.table("w"), wharf.table("emb")
    refused(TypeError, r"pull: table 'w' is dense, the call is for sparse tables", c.pull, w.id,
            K3, np.zeros((3, 5), np.float32))
    refused(TypeError, r"dense_pull: table 'emb' is sparse", c.dense_pull, emb.id,
            np.zeros(15, np.float32))
    refused(ValueError, r"table: no table 4096 in the model", c.pull, 4096, K3,
            np.zeros((3, 4), np.float32))
    refused(TypeError, r"table: expected a table id \(int\), got str", c.pull, "emb", K3,
            np.zeros((3, 4), np.float32))
    refused(KeyError, r"no table 'nope' in the model", wharf.table, "nope")


def test_a_refused_request_raises_the_servers_reason(job, fresh_keys):
    g = np.zeros((3, 4), np.float32)
    g[1, 2] = np.nan
    with pytest.raises(wharf.Error) as e:
        wharf.table("emb").push(fresh_keys(3), g)
    assert e.value.errno > 0 and e.value.message == str(e.value)
    assert "push of table %d" % wharf.table("emb").id in str(e.value)
    assert not isinstance(e.value, wharf.TimeoutError)
    wharf.table("emb").pull(fresh_keys(3))  # still usable


@pytest.mark.modes("async")
def test_a_full_table_refuses_new_keys_and_applies_the_rest(job, fresh_keys):
    capped = wharf.table("capped")
    assert capped.info["max_rows"] == 64 and capped.info["admit_after"] == 0
    keys, g = fresh_keys(300), -np.ones(300, np.float32)
    assert not capped.pull(keys).any()  # unknown keys: the initializer's values
    with pytest.raises(wharf.Error, match=r"memory cap .* keys new to it were refused") as e:
        capped.push(keys, g)  # 64 become rows, the table is full, the rest refused
    assert e.value.errno == errno.EDQUOT
    rows = capped.pull(keys)
    assert set(np.unique(rows)) <= {0.0, 1.0} and 0 < (rows == 1).sum() <= 64


@pytest.mark.modes("async")
def test_wait_timeout_argument(job):
    h = wharf.table("emb").pull_async(K3)
    refused(ValueError, r"timeout: expected seconds >= 0", h.wait, timeout=-1)
    h.wait()


@pytest.mark.modes("async")
def test_wait_with_timeout_zero_returns_a_completed_request(job):
    out = np.zeros((3, 4), np.float32)
    h = wharf.table("emb").pull_async(K3, out=out)
    assert wait_for(h.done, 10)
    assert h.wait(timeout=0) is out
    assert h.wait(timeout=0) is out  # waited twice: the same result


@pytest.mark.modes("sync")
def test_a_barrier_step_out_of_range_is_refused_not_wrapped(job):
    s = wharf.step()
    for bad in (2**64 + s, -1):
        refused(ValueError, r"step: expected an integer 0\.\.18446744073709551615, got -?\d+",
                wharf.barrier, bad)
        refused(ValueError, r"step: expected an integer 0\.\.", wharf.barrier_async, bad)
    refused(TypeError, r"step: expected an integer, got float", wharf.barrier, float(s))
    assert wharf.step() == s  # no barrier passed


@pytest.mark.modes("async")
@pytest.mark.protocols("kernel")
def test_a_close_while_threads_call_ends_each_call_cleanly(job):
    """stop_worker() while four threads pull, blocking and through Requests they wait for
    and drop: each call completes or raises wharf.Error (EBADF: closed), and the close does
    not touch a Request its thread freed meanwhile (it did: a use after free that
    AddressSanitizer showed in a few rounds). Kernel TCP only: it opens the client ten
    times, and a DPDK process brings up its one client for its life."""
    import threading
    emb = wharf.table("emb")
    keys = np.arange(64, dtype=np.uint64)
    for _ in range(10):
        c = wharf.init_worker()
        errors = []

        def calls(use_request):
            try:
                while True:
                    out = np.empty((64, 4), np.float32)
                    if use_request:
                        h = c.pull_async(emb.id, keys, out)
                        h.wait()
                        del h
                    else:
                        c.pull(emb.id, keys, out)
            except wharf.Error as e:
                errors.append(e.errno)
        threads = [threading.Thread(target=calls, args=(i % 2,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.05)
        wharf.stop_worker()
        for t in threads:
            t.join(30)
        assert errors == [errno.EBADF] * 4
    emb.pull(keys)  # the tables reopen the client


@pytest.mark.modes("async")
def test_tables_declared_after_the_client_opened_are_refused(job):
    with pytest.raises(wharf.Error, match="in use by a client or a server"):
        wharf.sparse_table("late", dim=2)


# ---- configuration and model: the same checks the executables make, without a cluster

@pytest.mark.parametrize("argv, match", [
    (["--role", "chief"], r"--role"),
    (["--role", "worker", "--ps", "10.0.0.1:99999"], r"--ps"),
    (["--role", "worker", "--ps", "127.0.0.1:4444", "--mode", "sometimes"], r"--mode"),
    (["--role", "worker", "--ps", "127.0.0.1:4444", "--no-such-flag", "1"],
     r"unknown option '--no-such-flag'"),
])
def test_bad_config_flags(argv, match):
    with pytest.raises(wharf.ConfigError, match=match) as e:
        _wharf.Config(argv)
    assert e.value.errno == errno.EINVAL


def test_bad_config_file_names_its_line(tmp_path):
    p = tmp_path / "cluster.json"
    p.write_text('{"cluster": {"ps": ["127.0.0.1:4444"]},\n "mode": 17}\n')
    with pytest.raises(wharf.ConfigError, match=r"cluster.json: mode: expected a string"):
        _wharf.Config(["--role", "worker", "--config", str(p)])
    p.write_text('{"mode": "sync",\n oops}\n')
    with pytest.raises(wharf.ConfigError, match=r"cluster.json:2:5: JSON syntax error"):
        _wharf.Config(["--role", "worker", "--config", str(p)])


def test_bad_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(wharf.ConfigError, match="TF_CONFIG:1:4: JSON syntax error"):
        _wharf.Config([])


def test_bad_model_files(tmp_path):
    with pytest.raises(wharf.ConfigError, match="nonexistent.json") as e:
        _wharf.Model.load(str(tmp_path / "nonexistent.json"))
    assert e.value.errno == errno.ENOENT
    p = tmp_path / "model.json"
    p.write_text('{"tables": [\n  {"name": "emb", "kind": "sparse", "dim": 0}\n]}\n')
    with pytest.raises(wharf.ConfigError, match=r"model.json: table 0 'emb': dim: 0 outside"):
        _wharf.Model.load(str(p))
    with pytest.raises(wharf.ConfigError, match=r"text:1"):
        _wharf.Model.parse("{", "text")


@pytest.mark.parametrize("kw, exc, match", [
    (dict(dim=0), wharf.ConfigError, r"dim"),
    (dict(dim=2000), wharf.ConfigError, r"dim"),
    (dict(kind="dense", rows=0, dim=4), wharf.ConfigError, r"rows"),
    (dict(optimizer="sgdd"), ValueError, r"optimizer: expected one of sgd, adagrad, adam, ftrl"),
    (dict(kind="tree"), ValueError, r"kind: expected one of sparse, dense"),
    (dict(init="ones"), ValueError, r"init: expected one of zeros, uniform, normal"),
    (dict(dim=-1), ValueError, r"dim: expected an integer 0\.\."),
    (dict(dim="4"), TypeError, r"dim: expected an integer, got str"),
    (dict(lr="fast"), TypeError, r"lr: expected a number, got str"),
    (dict(lr=0.0), wharf.ConfigError, r"lr"),
    (dict(colour=1), TypeError, r"unknown table field 'colour'"),
    (dict(max_rows=-1), ValueError, r"max_rows: expected an integer 0\.\."),
    (dict(pull_inserts=1), TypeError, r"pull_inserts: expected True or False, got int"),
    (dict(pull_inserts=True, evict_after=9), wharf.ConfigError, r"pull_inserts: not with"),
    (dict(kind="dense", rows=2, admit_after=2), wharf.ConfigError,
     r"admit_after: only a sparse table has memory policies"),
])
def test_bad_table_declarations(kw, exc, match):
    m = _wharf.Model()
    with pytest.raises(exc, match=match):
        m.add("t", **kw)
    assert len(m) == 0  # nothing added by a refusal
    m.add("t", dim=2)
    with pytest.raises(wharf.ConfigError):
        m.add("t", dim=2)  # the name is taken
    with pytest.raises(ValueError, match="name: expected 1..63 bytes"):
        m.add("x" * 64)


def absent_server(port, wait_timeout):
    """A worker's config naming a server that is not there on port, and a model."""
    cfg = _wharf.Config(["--role", "worker", "--ps", "127.0.0.1:%d" % port, "--protocol",
                         "kernel", "--num-workers", "1", "--wait-timeout", str(wait_timeout),
                         "--retry-interval", "1"])
    m = _wharf.Model()
    m.add("emb", dim=4)
    return cfg, m


@pytest.mark.parametrize("depth", [-1, 2**32])
def test_a_queue_depth_out_of_range_is_refused_not_wrapped(depth):
    cfg, m = absent_server(next_port(), 1)
    refused(ValueError, r"queue_depth: expected an integer 0\.\.4294967295, got %d" % depth,
            _wharf.Client, cfg, m, queue_depth=depth)


def test_servers_that_do_not_come_up_time_out():
    """A worker whose server never answers gives up after --wait-timeout: TimeoutError."""
    port = next_port()
    cfg, m = absent_server(port, 1)
    t0 = time.time()
    with pytest.raises(wharf.TimeoutError) as e:
        _wharf.Client(cfg, m)
    assert e.value.errno == errno.ETIMEDOUT
    assert "127.0.0.1:%d" % port in str(e.value)
    assert time.time() - t0 < 15


def test_ctrl_c_while_waiting_for_servers_interrupts_the_open():
    """SIGINT while a client waits for servers that never come: KeyboardInterrupt at once
    (within a second or two), not after --wait-timeout; the library is left usable."""
    import os
    import signal
    import threading
    port = next_port()
    cfg, m = absent_server(port, 60)
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.time()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        _wharf.Client(cfg, m)
    assert time.time() - t0 < 10
    timer.join()
    # Usable after: the same open times out as it should.
    cfg, m = absent_server(port, 1)
    with pytest.raises(wharf.TimeoutError):
        _wharf.Client(cfg, m)


def own_server(wait_timeout, mode="async"):
    """A PS process (kernel TCP) of one table emb of dim 4 for one worker: (ps, flags)."""
    import sys
    from conftest import Proc
    port = next_port()
    flags = ["--ps", "127.0.0.1:%d" % port, "--protocol", "kernel", "--num-workers", "1",
             "--mode", mode, "--wait-timeout", str(wait_timeout), "--retry-interval", "1"]
    code = ("import sys, wharf\nwharf.init(sys.argv[1:])\nwharf.sparse_table('emb', dim=4)\n"
            "wharf.run_server()\n")
    ps = Proc("ps-own-%d" % port, [sys.executable, "-c", code, "--role", "ps"] + flags)
    assert wait_for(lambda: "ps 0 serving" in ps.text(), 30), ps.text()
    return ps, flags


def gone_server(wait_timeout, mode="async"):
    """A PS process (kernel TCP) of one table emb of dim 4, a client of it (this process
    worker 0) that pushed once, then the server killed: (ps, client, keys, grads)."""
    import signal
    ps, flags = own_server(wait_timeout, mode)
    cfg = _wharf.Config(flags + ["--role", "worker", "--task-index", "0"])
    m = _wharf.Model()
    m.add("emb", dim=4)
    c = _wharf.Client(cfg, m)
    keys = np.arange(8, dtype=np.uint64)
    grads = np.ones((8, 4), np.float32)
    c.push(0, keys, grads)
    ps.stop(signal.SIGKILL)
    return ps, c, keys, grads


def sigint_in(secs):
    import os
    import signal
    import threading
    t = threading.Timer(secs, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def test_a_client_keeps_its_config_alive():
    """The library reads a client's config until it is closed (a reconnect reads the servers'
    endpoints from it): the Client holds a reference to its Config, so a caller that drops
    its own (gone_server does) does not leave the network thread reading freed memory."""
    import sys
    ps, flags = own_server(60, "async")
    try:
        cfg = _wharf.Config(flags + ["--role", "worker", "--task-index", "0"])
        m = _wharf.Model()
        m.add("emb", dim=4)
        before = sys.getrefcount(cfg)
        c = _wharf.Client(cfg, m)
        assert sys.getrefcount(cfg) == before + 1
        c.close()
        del c
        assert sys.getrefcount(cfg) == before
    finally:
        ps.stop()


def test_ctrl_c_during_a_call_to_a_server_that_went_away():
    """A blocking push to a server that was killed waits for it to come back (--wait-timeout,
    60 s here). SIGINT meanwhile raises KeyboardInterrupt at once; the push stays in flight,
    so close() gives up waiting for the server and returns at once too."""
    ps, c, keys, grads = gone_server(60)
    try:
        t0 = time.time()
        timer = sigint_in(1.0)
        with pytest.raises(KeyboardInterrupt):
            c.push(0, keys, grads)
        assert time.time() - t0 < 10
        timer.join()
        t0 = time.time()
        c.close()
        assert time.time() - t0 < 10
        assert c.closed
    finally:
        ps.stop()


def test_ctrl_c_during_a_geo_pull_from_a_server_that_went_away():
    """geo_pull waits for its server as the other calls do, and SIGINT ends it the same way.
    A client dropped after that (not closed) is closed at once: its network thread ends."""
    import os
    ps, c, keys, grads = gone_server(60, "geo")
    try:
        t0 = time.time()
        timer = sigint_in(1.0)
        with pytest.raises(KeyboardInterrupt):
            c.geo_pull(0)
        assert time.time() - t0 < 10
        timer.join()
        threads = len(os.listdir("/proc/self/task"))
        t0 = time.time()
        del c
        assert time.time() - t0 < 10
        # pthread_join returns once the kernel clears the thread's id, which comes before
        # the thread leaves /proc/self/task: a loaded host showed it there still.
        assert wait_for(lambda: len(os.listdir("/proc/self/task")) < threads, 2)
    finally:
        ps.stop()


def test_ctrl_c_during_close_gives_up_on_a_server_that_went_away():
    """close() completes what is in flight, which for a killed server means waiting for it to
    come back. SIGINT meanwhile makes the waits end: close returns at once and raises
    KeyboardInterrupt, and the request in flight fails with ECANCELED and the reason."""
    ps, c, keys, grads = gone_server(60)
    try:
        r = c.push_async(0, keys, grads)
        t0 = time.time()
        timer = sigint_in(1.0)
        with pytest.raises(KeyboardInterrupt):
            c.close()
        assert time.time() - t0 < 10
        timer.join()
        assert c.closed
        with pytest.raises(wharf.Error) as e:
            r.wait()
        assert e.value.errno == errno.ECANCELED
        assert "push of table 0" in str(e.value) and "interrupted" in str(e.value)
    finally:
        ps.stop()


def test_calls_before_init_and_on_a_server_are_refused():
    import subprocess
    import sys
    code = ("import wharf\n"
            "try:\n    wharf.table('x')\nexcept wharf.Error as e:\n    print('E1', e)\n"
            "wharf.init(role='ps', ps='127.0.0.1:1', num_workers=1, protocol='kernel')\n"
            "wharf.sparse_table('emb', dim=2)\n"
            "try:\n    wharf.table('emb').pull(__import__('numpy').zeros(1, 'uint64'))\n"
            "except wharf.Error as e:\n    print('E2', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60).stdout
    assert "E1 wharf: call wharf.init() first" in out
    assert "E2 this node's role is server" in out


def run_worker(code, argv, timeout=60):
    """code in a Python process of its own (wharf.init is once per process): its stdout."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", code] + argv, capture_output=True, text=True,
                          timeout=timeout).stdout


def test_a_table_of_a_stopped_job_is_refused_not_served_by_a_new_client():
    """After wharf.stop(), a table handle of the old job raises: a client reopened for it
    would be a new process of this worker's id, and the servers would refuse the calls of
    the job init() starts next."""
    ps, flags = own_server(30)
    try:
        code = ("import sys, numpy as np, wharf\n"
                "wharf.init(sys.argv[1:])\n"
                "emb = wharf.sparse_table('emb', dim=4)\n"
                "k = np.arange(3, dtype=np.uint64)\n"
                "emb.pull(k)\n"
                "wharf.stop_worker()\n"
                "emb.pull(k)  # stop_worker(): the tables can be used again\n"
                "wharf.stop()\n"
                "for call in (lambda: emb.pull(k), lambda: emb.push_async(k, np.ones((3, 4), "
                "np.float32))):\n"
                "    try:\n        call()\n        print('SERVED')\n"
                "    except wharf.Error as e:\n        print('E', e)\n")
        out = run_worker(code, flags + ["--role", "worker", "--task-index", "0"])
        assert out.count("E wharf.stop() ended the job of this table") == 2, out
    finally:
        ps.stop()


def test_stop_while_the_client_waits_for_servers_ends_the_wait():
    """wharf.stop() from a SIGTERM handler (it runs in the thread waiting in init_worker)
    or from another thread ends the wait for servers that are not there: init_worker raises
    wharf.Error, errno ECANCELED, at once, and init() can start again."""
    code = ("import os, signal, sys, threading, time, wharf\n"
            "def attempt(how):\n"
            "    wharf.init(sys.argv[1:])\n"
            "    wharf.sparse_table('emb', dim=4)\n"
            "    how()\n"
            "    t0 = time.time()\n"
            "    try:\n"
            "        wharf.init_worker()\n"
            "        print('OPENED')\n"
            "    except wharf.Error as e:\n"
            "        print('E', e.errno, e, '%.0f s' % (time.time() - t0))\n"
            "signal.signal(signal.SIGTERM, lambda *_: wharf.stop())\n"
            "attempt(lambda: threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))"
            ".start())\n"
            "attempt(lambda: threading.Timer(0.5, wharf.stop).start())\n")
    argv = ["--role", "worker", "--ps", "127.0.0.1:%d" % next_port(), "--protocol", "kernel",
            "--num-workers", "1", "--wait-timeout", "60", "--retry-interval", "1"]
    out = run_worker(code, argv, timeout=40)
    line = "E %d Client: closed while it waited for the servers" % errno.ECANCELED
    assert out.count(line) == 2, out
    assert all(int(ln.split()[-2]) < 10 for ln in out.splitlines()), out


# ---- the cluster from the executables' sources (no servers needed)

def test_config_from_tf_config_paddle_and_flags(monkeypatch):
    for k in ("TF_CONFIG", "TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINER_ID",
              "PADDLE_TRAINERS_NUM", "WHARF_MODE", "WHARF_PROTOCOL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TF_CONFIG", '{"cluster":{"ps":["127.0.0.1:4444"],"worker":'
                       '["127.0.0.1:3333","127.0.0.1:3334"]},"task":{"type":"worker","index":1}}')
    monkeypatch.setenv("WHARF_MODE", "geo")
    monkeypatch.setenv("WHARF_PROTOCOL", "kernel")
    c = _wharf.Config([])
    assert (c.role, c.index, c.servers, c.workers, c.mode, c.protocol) == \
        ("worker", 1, 1, 2, "geo", "kernel")
    # flags (wharf.init's keyword arguments) come before TF_CONFIG
    c = _wharf.Config(wharf.flags_of({"task_index": 0, "mode": "sync", "geo_k": None}))
    assert (c.index, c.mode) == (0, "sync")
    monkeypatch.delenv("TF_CONFIG")
    monkeypatch.setenv("TRAINING_ROLE", "PSERVER")
    monkeypatch.setenv("PADDLE_PSERVERS_IP_PORT_LIST", "127.0.0.1:4444,127.0.0.1:4445")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "3")
    monkeypatch.setenv("POD_IP", "127.0.0.1")
    monkeypatch.setenv("PADDLE_PORT", "4445")
    c = _wharf.Config([])
    assert (c.role, c.index, c.servers, c.workers) == ("server", 1, 2, 3)


def test_flags_of_keyword_arguments():
    assert wharf.flags_of({"task_index": 1, "ps": ["a:1", "b:2"], "tensor_fuse": True,
                           "geo_k": None, "mode": "sync"}) == \
        ["--task-index", "1", "--ps", "a:1,b:2", "--tensor-fuse", "true", "--mode", "sync"]
