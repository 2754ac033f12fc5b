"""Round trips of every call of the wharf package against a real PS, on kernel TCP and DPDK,
in sync, async and GEO mode (the job fixture), with the arrays' memory checked: what the
library writes lands in the very array passed as out=."""
import errno
import threading

import numpy as np
import pytest
import torch

import wharf
from conftest import expected
from tables import EMB_LR, W_LR


def test_job_is_what_init_loaded(job):
    assert wharf.is_worker() and not wharf.is_server()
    assert wharf.role() == "worker"
    assert wharf.worker_index() == 0
    assert wharf.num_workers() == 1 and wharf.num_servers() == 1
    assert wharf.protocol() == job["protocol"]
    assert wharf.mode() == job["mode"]
    assert wharf.version().count(".") == 2
    assert set(wharf.tables()) >= {"emb", "ledger", "init", "w", "tbag"}


def test_sparse_pull_push_round_trip(job, applied, fresh_keys):
    emb = wharf.table("emb")
    keys = fresh_keys(5)
    before = emb.pull(keys)
    assert before.shape == (5, 4) and before.dtype == np.float32
    assert not before.any()  # zeros init
    g = np.arange(20, dtype=np.float32).reshape(5, 4) / 8
    assert emb.push(keys, g) is None
    applied()
    np.testing.assert_allclose(emb.pull(keys), expected(before, g, EMB_LR), rtol=1e-6)


def test_sparse_initialiser_is_deterministic(job, fresh_keys):
    t = wharf.table("init")
    keys = fresh_keys(64)
    a = t.pull(keys)
    assert (a >= -1).all() and (a < 1).all() and a.std() > 0.3
    np.testing.assert_array_equal(t.pull(keys[::-1].copy()), a[::-1])


@pytest.mark.modes("async", "geo")  # sync applies a push at the barrier, after the reply
def test_push_pull_returns_the_rows_after_the_push(job, applied, fresh_keys):
    emb = wharf.table("emb")
    keys = fresh_keys(3)
    g = np.ones((3, 4), np.float32)
    out = np.full((3, 4), 7.0, np.float32)
    r = emb.push_pull(keys, g, out=out)
    assert r is out
    np.testing.assert_allclose(out, expected(np.zeros((3, 4), np.float32), g, EMB_LR))


def test_pull_writes_into_out_without_a_copy(job, fresh_keys):
    emb = wharf.table("emb")
    keys = fresh_keys(4)
    out = np.full((4, 4), 5.0, np.float32)
    addr = out.__array_interface__["data"][0]
    r = emb.pull(keys, out=out)
    assert r is out and r.__array_interface__["data"][0] == addr
    assert not out.any()  # the library wrote zeros over the 5s, in place
    # a torch tensor's memory through .numpy(): the tensor sees the rows
    t = torch.full((4, 4), 3.0)
    emb.pull(keys, out=t.numpy())
    assert not t.any()
    # a view into a bigger array: rows 2..5 of it, the rest untouched
    big = np.full((8, 4), 9.0, np.float32)
    emb.pull(keys, out=big[2:6])
    assert not big[2:6].any() and (big[:2] == 9).all() and (big[6:] == 9).all()


def test_dense_round_trip(job, applied):
    w = wharf.table("w")
    assert w.shape == (3, 5)
    before = w.pull()
    g = np.linspace(-1, 1, 15, dtype=np.float32).reshape(3, 5)
    w.push(g)
    applied()
    out = np.empty(15, np.float32)  # any shape of rows * dim floats
    assert w.pull(out=out) is out
    np.testing.assert_allclose(out.reshape(3, 5), expected(before, g, W_LR), rtol=1e-5,
                               atol=1e-6)


def test_async_calls_and_their_handles(job, applied, fresh_keys):
    emb, w = wharf.table("emb"), wharf.table("w")
    keys = fresh_keys(6)
    g = np.full((6, 4), 0.5, np.float32)
    h = emb.push_async(keys, g)
    del g  # the handle holds the gradient's buffer until the push completed
    assert h.wait(timeout=30) is None and h.done()
    hd = w.push_async(np.ones((3, 5), np.float32))
    hd.wait()
    if job["mode"] == "sync":
        wharf.barrier_async(job["modules"][2].steps).wait()
        job["modules"][2].steps += 1
    out = np.empty((6, 4), np.float32)
    h = emb.pull_async(keys, out=out)
    addr = out.__array_interface__["data"][0]
    del out
    r = h.wait()
    assert r.__array_interface__["data"][0] == addr  # the same array came back
    np.testing.assert_allclose(r, expected(np.zeros((6, 4), np.float32),
                                           np.full((6, 4), 0.5, np.float32), EMB_LR))
    assert h.wait() is r  # waiting again returns the same result
    d = w.pull_async().wait()
    assert d.shape == (3, 5)
    if job["mode"] != "sync":
        r = emb.push_pull_async(keys, np.zeros((6, 4), np.float32)).wait()
        assert r.shape == (6, 4)


def test_many_requests_in_flight(job, fresh_keys):
    emb = wharf.table("emb")
    keys = fresh_keys(200)
    hs = [emb.pull_async(keys[i:i + 10]) for i in range(0, 200, 10)]
    rows = np.concatenate([h.wait() for h in hs])
    np.testing.assert_array_equal(rows, emb.pull(keys))


def test_empty_key_batch(job):
    emb = wharf.table("emb")
    none = np.empty(0, np.uint64)
    assert emb.pull(none).shape == (0, 4)
    emb.push(none, np.empty((0, 4), np.float32))
    assert emb.pull_async(none).wait().shape == (0, 4)


@pytest.mark.modes("sync")
def test_barrier(job):
    ps = job["modules"][2]
    s = wharf.step()
    with pytest.raises(wharf.Error) as e:
        wharf.barrier(s + 1)  # not this worker's step: refused, naming it
    assert e.value.errno == errno.EINVAL and "at step %d" % s in e.value.message
    wharf.barrier(s)
    wharf.barrier_async(s + 1).wait(timeout=30)
    assert wharf.step() == s + 2
    ps.steps += 2


@pytest.mark.modes("geo")
def test_geo_pull_hands_back_changed_rows(job, fresh_keys):
    emb = wharf.table("emb")
    emb.geo_pull()  # from now on
    keys = fresh_keys(3)
    emb.push(keys, np.ones((3, 4), np.float32))
    k, rows = emb.geo_pull()
    assert k.dtype == np.uint64 and rows.shape == (len(k), 4)
    got = dict(zip(k.tolist(), rows.tolist()))
    for key in keys.tolist():
        if key in got:  # a server may leave out the rows this worker changed itself
            assert got[key] == [1.0] * 4


def test_four_threads_push_the_ledger_exactly_once(job, applied, fresh_keys):
    """Four Python threads push -1 to one key of an SGD lr 1 table at once (the GIL released
    in every call): the row counts every push exactly once."""
    ledger = wharf.table("ledger")
    key = fresh_keys(1)
    start = ledger.pull(key)[0, 0]
    n, errors = 300, []
    minus = np.full((1, 1), -1.0, np.float32)

    def pusher(i):
        try:
            for j in range(n):
                if j % 3 == 0:
                    ledger.push_async(key, minus).wait()
                else:
                    ledger.push(key, minus)
        except Exception as e:  # the assertion below names it
            errors.append(e)

    ts = [threading.Thread(target=pusher, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in ts)
    applied()
    value = ledger.pull(key)[0, 0]
    if job["mode"] == "geo":
        assert value - start == -4 * n  # GEO adds the pushed deltas
    else:
        assert value - start == 4 * n


def test_stats_count_the_calls(job, fresh_keys):
    s0 = wharf.stats()
    wharf.table("emb").pull(fresh_keys(2))
    s1 = wharf.stats()
    assert s1["calls"] > s0["calls"] and s1["replies"] > s0["replies"]
    assert s1["bytes_in"] > s0["bytes_in"]
