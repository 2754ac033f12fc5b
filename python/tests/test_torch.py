"""wharf.torch against a real PS: the embedding's forward is the pooled rows of the table, its
backward pushes each unique id's summed gradient; DenseSync keeps a module's parameters on the
PS in the job's mode (sync, async: the servers' SGD step; GEO: local steps, the delta later)
without copying them."""
import numpy as np
import pytest
import torch

import wharf
import wharf.torch
from conftest import apply_pushes
from tables import BAG_LR, LIN_LR

IDS = torch.tensor([[11, 12, 11], [13, 11, 14]])  # bags of 3 ids, 11 twice in bag 0


def rows_of(bag, ids):
    return bag.table.pull(np.unique(ids.numpy().astype(np.uint64)))


def test_embedding_bag_forward_pools_the_pulled_rows(job):
    bag = job["modules"][0]
    mean_bag = wharf.torch.EmbeddingBag("tbag", 4, mode="mean", lr=BAG_LR)
    ids = IDS + 1000  # rows this test alone touches
    with torch.no_grad():
        s, m = bag(ids), mean_bag(ids)
    table = dict(zip([1011, 1012, 1013, 1014], rows_of(bag, ids)))
    want = np.stack([sum(table[i] for i in row) for row in ids.tolist()])
    np.testing.assert_allclose(s.numpy(), want, rtol=1e-6)
    np.testing.assert_allclose(m.numpy(), want / 3, rtol=1e-6)
    flat = ids.reshape(-1)
    np.testing.assert_allclose(bag(flat, offsets=torch.tensor([0, 3])).detach().numpy(), want,
                               rtol=1e-6)
    with pytest.raises(ValueError, match="mode: expected 'sum' or 'mean'"):
        wharf.torch.EmbeddingBag("tbag", 4, mode="max")
    with pytest.raises(TypeError, match="ids: expected an integer tensor"):
        bag(ids.float())


def test_embedding_bag_backward_pushes_each_ids_gradient(job):
    bag = job["modules"][0]
    ids = IDS + 2000
    before = dict(zip([2011, 2012, 2013, 2014], rows_of(bag, ids)))
    w = torch.arange(8, dtype=torch.float32).reshape(2, 4)
    (bag(ids) * w).sum().backward()  # d loss / d row = sum over its occurrences of w[bag]
    grad = {2011: 2 * w[0] + w[1], 2012: w[0], 2013: w[1], 2014: w[1]}
    if wharf.mode() == "geo":
        bag.geo_sync()  # GEO steps locally: the delta reaches the PS at a sync
    else:
        bag.flush()
        apply_pushes()
    after = dict(zip([2011, 2012, 2013, 2014], rows_of(bag, ids)))
    for k in grad:
        np.testing.assert_allclose(after[k], before[k] - BAG_LR * grad[k].numpy(), rtol=1e-5,
                                   atol=1e-6)


@pytest.mark.modes("async", "sync")  # GEO's embedding pushes at geo_sync, not through flush
def test_flush_waits_for_every_push_then_raises_the_first_error(job):
    bag = job["modules"][0]
    keys = np.array([4011, 4012], np.uint64)
    before = bag.table.pull(keys)
    bad = np.full((2, 4), np.nan, np.float32)
    good = np.arange(8, dtype=np.float32).reshape(2, 4)
    bag._pending += [bag.table.push_async(keys, bad), bag.table.push_async(keys, good),
                     bag.table.push_async(keys, bad)]
    with pytest.raises(wharf.Error, match="finite") as e:
        bag.flush()
    assert "2 of 3 requests failed" in " ".join(getattr(e.value, "__notes__", []))
    assert not bag._pending
    apply_pushes()
    np.testing.assert_allclose(bag.table.pull(keys), before - BAG_LR * good, rtol=1e-5,
                               atol=1e-6)


def test_a_request_refused_as_it_is_made_ends_the_issuing_after_the_issued_ended(job):
    bag = job["modules"][0]
    keys = np.arange(10**9, 10**9 + 100000, dtype=np.uint64)  # 1.6 MB: in flight a while
    made = []

    def issue():
        made.append(bag.table.push_async(keys, np.zeros((len(keys), 4), np.float32)))
        yield made[-1]
        yield bag.table.push_async(keys[:1], np.ones((1, 3), np.float32))  # not the table's dim
        made.append("issued past a refusal")

    with pytest.raises(ValueError, match=r"expected shape \(1, 4\)"):
        wharf.torch._wait_all(issue())
    assert len(made) == 1 and made[0].done()  # the issued push ended before the raise


def test_no_push_outside_training(job):
    bag = job["modules"][0]
    ids = IDS + 3000
    before = rows_of(bag, ids)
    bag.eval()
    try:
        bag(ids).sum()  # no graph: nothing to push
    finally:
        bag.train()
    assert not bag._pending
    np.testing.assert_array_equal(rows_of(bag, ids), before)


def test_dense_sync_steps_the_parameters_in_place(job):
    bag, lin, ps = job["modules"]
    ptr = lin.weight.data_ptr()
    ps.pull()
    assert lin.weight.data_ptr() == ptr  # pulled into the parameter's own memory
    w0, b0 = lin.weight.detach().clone(), lin.bias.detach().clone()
    x = torch.ones(3, 4)
    lin(x).pow(2).sum().backward()
    gw, gb = lin.weight.grad.clone(), lin.bias.grad.clone()
    ps.step()
    assert lin.weight.grad is None and lin.weight.data_ptr() == ptr
    np.testing.assert_allclose(lin.weight.detach(), w0 - LIN_LR * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.bias.detach(), b0 - LIN_LR * gb, rtol=1e-5, atol=1e-6)
    ps.finish()  # GEO: the delta goes to the PS; then every parameter is the PS's
    np.testing.assert_allclose(lin.weight.detach(), w0 - LIN_LR * gw, rtol=1e-5, atol=1e-6)
    tw = [t for p, t in ps.params if p is lin.weight][0]
    np.testing.assert_allclose(tw.pull().reshape(2, 4), lin.weight.detach(), rtol=1e-6)


def test_dense_sync_tables_start_from_the_modules_distribution(job):
    _, lin, ps = job["modules"]
    t = [t for p, t in ps.params if p is lin.weight][0]
    assert t.name == "lin.weight" and t.info["init"] == "uniform"
    assert t.info["init_a"] < 0 < t.info["init_b"] <= 0.5  # U(+-1/sqrt(fan_in = 4))
