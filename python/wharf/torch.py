"""wharf.torch — PyTorch modules over wharf's parameter server.

  Embedding(name, dim, ...)       a lookup table of rows on a sparse PS table: forward pulls
                                  the batch's unique ids, backward pushes their gradients
  EmbeddingBag(name, dim, mode)   the same, pooled per bag (sum or mean) as nn.EmbeddingBag
  DenseSync(module, lr, ...)      keeps the module's dense parameters on dense PS tables in
                                  the job's mode: sync (push, barrier, pull every step), async
                                  (push, pull) or GEO (local SGD steps, the delta every k)

A fleet-style script declares the same modules on every node, then serves or trains:

    emb = wharf.torch.EmbeddingBag("emb", 16, mode="mean", lr=0.05)
    net = MyNet(emb)
    ps = wharf.torch.DenseSync(net, lr=0.1)
    if wharf.is_server():
        wharf.run_server()
    else:
        ps.pull()
        for x, y in batches:
            loss = loss_fn(net(x), y)
            loss.backward()
            ps.step()                      # the PS is the optimizer
        ps.finish()

The servers run the optimizer (the table's, e.g. SGD with lr); GEO workers step locally with
the same learning rate and follow Paddle's GEO rules: a sync pushes 1/workers of what changed
since the last one (the rest stays local for later syncs), and a value from the PS becomes
value + (local - base), base = value (idempotent: a row served twice changes nothing). Rows
and parameters go between PyTorch and the library without a copy: tensors share memory with
the NumPy arrays handed to wharf (torch.from_numpy, .numpy()).
"""
import hashlib

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

import wharf

__all__ = ["Embedding", "EmbeddingBag", "DenseSync"]


def _wait_all(requests):
    """Issues the requests (an iterable that makes them, such as a generator) and waits for
    every one issued, then raises the first error, if any, with a note of how many failed:
    when a step, a pull or a flush raises, none of its requests is still in flight (a pull
    would still be writing into a parameter). A request refused as it is made ends the
    issuing (its error comes first); those already made are waited for."""
    issued, errors = [], []
    try:
        for r in requests:
            issued.append(r)
    except Exception as e:  # refused at once: nothing of it in flight
        errors.append(e)
    total = len(issued) + len(errors)
    for r in issued:
        try:
            r.wait()
        except Exception as e:  # that call's error: the request has ended
            errors.append(e)
    if errors:
        if len(errors) > 1:
            errors[0].add_note("%d of %d requests failed; this is the first one's error"
                               % (len(errors), total))
        raise errors[0]


def _keys_of(ids):
    """ids (a torch integer tensor or a NumPy integer array) as contiguous uint64, no copy
    when it is already 64-bit (int64 ids are reinterpreted: their bits are the key)."""
    if isinstance(ids, torch.Tensor):
        if ids.dtype not in (torch.int64, torch.int32):
            raise TypeError("ids: expected an integer tensor, got %s" % ids.dtype)
        ids = ids.detach().cpu().contiguous().numpy()
    a = np.ascontiguousarray(ids)
    if a.dtype == np.uint64:
        return a
    if a.dtype == np.int64:
        return a.view(np.uint64)
    if a.dtype.kind in "iu":
        return a.astype(np.uint64)
    raise TypeError("ids: expected integer ids, got %s" % a.dtype)


class _PSRows(torch.autograd.Function):
    """Identity on the pulled rows; its backward hands the rows' gradient to the owner."""

    @staticmethod
    def forward(ctx, anchor, rows, owner, keys):
        ctx.owner = owner
        ctx.keys = keys
        return rows.view_as(rows)

    @staticmethod
    def backward(ctx, grad):
        ctx.owner._push_grad(ctx.keys, grad)
        return None, None, None, None


class Embedding(nn.Module):
    """Rows of a sparse PS table: forward(ids) returns ids.shape + (dim,).

    name, dim: the table; fields: its optimizer and initialiser (wharf.sparse_table), e.g.
    lr=0.05, optimizer="adagrad", init="normal", init_b=0.01. Each forward pulls the rows of
    the batch's distinct ids (one request per call, the GIL released); backward pushes their
    summed gradients (asynchronously: the next forward, DenseSync.step() or flush() waits for
    it). In GEO mode the rows live in a local copy stepped with the table's lr, and
    geo_sync() (DenseSync.step does it every k steps) sends the deltas and takes the rows
    others changed.
    """

    def __init__(self, name, dim, **fields):
        super().__init__()
        self.table = wharf.sparse_table(name, dim, **fields)
        self.dim = dim
        self.lr = float(fields.get("lr", self.table.info["lr"]))
        # Gives autograd a leaf that needs a gradient, so backward reaches _PSRows.
        self._anchor = nn.Parameter(torch.zeros(0), requires_grad=True)
        self._pending = []
        self._geo = None

    def _rows(self, ids):
        """(rows tensor with autograd to the PS, inverse index into it)."""
        keys = _keys_of(ids)
        flat = keys.reshape(-1)
        uk, inv = np.unique(flat, return_inverse=True)
        self.flush()
        if wharf.mode() == "geo":
            rows = self._geo_rows(uk)
        else:
            rows = self.table.pull(uk)
        t = torch.from_numpy(rows)
        if torch.is_grad_enabled() and self.training:
            t = _PSRows.apply(self._anchor, t, self, uk)
        return t, torch.from_numpy(inv.astype(np.int64)).reshape(keys.shape)

    def forward(self, ids):
        rows, inv = self._rows(ids)
        return F.embedding(inv, rows)

    def _push_grad(self, keys, grad):
        g = grad.detach().to(torch.float32).contiguous().numpy()
        if self._geo is not None:
            self._geo_step(keys, g)
        else:
            self._pending.append(self.table.push_async(keys, g))

    def flush(self):
        """Waits for the pushes in flight; raises the first one's error once all ended."""
        pending, self._pending = self._pending, []
        _wait_all(pending)

    # ---- GEO: a local copy of every row seen, stepped locally, deltas pushed at a sync
    def _geo_state(self):
        if self._geo is None:
            self._geo = {"index": {}, "rows": np.zeros((1024, self.dim), np.float32),
                         "base": np.zeros((1024, self.dim), np.float32),
                         "touched": np.zeros(1024, bool), "n": 0}
        return self._geo

    def _geo_index(self, keys):
        g = self._geo_state()
        index = g["index"]
        idx = np.empty(len(keys), np.int64)
        new = []
        for i, k in enumerate(keys.tolist()):
            j = index.get(k)
            if j is None:
                new.append(i)
            else:
                idx[i] = j
        if new:
            n0, n1 = g["n"], g["n"] + len(new)
            if n1 > len(g["rows"]):
                cap = max(n1, 2 * len(g["rows"]))
                for name in ("rows", "base"):
                    a = np.zeros((cap, self.dim), np.float32)
                    a[:n0] = g[name][:n0]
                    g[name] = a
                t = np.zeros(cap, bool)
                t[:n0] = g["touched"][:n0]
                g["touched"] = t
            fresh = keys[new]
            rows = self.table.pull(fresh)
            g["rows"][n0:n1] = rows
            g["base"][n0:n1] = rows
            for j, k in enumerate(fresh.tolist()):
                index[k] = n0 + j
            idx[new] = np.arange(n0, n1)
            g["n"] = n1
        return idx

    def _geo_rows(self, uk):
        g = self._geo_state()
        return g["rows"][self._geo_index(uk)]

    def _geo_step(self, keys, grad):
        g = self._geo
        idx = self._geo_index(keys)
        g["rows"][idx] -= self.lr * grad
        g["touched"][idx] = True

    def geo_sync(self):
        """GEO: pushes 1/workers of what the rows stepped since the last sync changed (their
        base moves with it), then takes the rows other workers changed."""
        g = self._geo
        if g is None:
            return
        n = g["n"]
        t = np.flatnonzero(g["touched"][:n])
        if len(t):
            inv = np.empty(n, np.uint64)
            for k, j in g["index"].items():
                inv[j] = k
            keys = inv[t]
            delta = (g["rows"][t] - g["base"][t]) / np.float32(wharf.num_workers())
            g["base"][t] += delta
            g["touched"][t] = False
            self.table.push(keys, np.ascontiguousarray(delta))
        keys, rows = self.table.geo_pull()
        if len(keys):
            idx = self._geo_index(keys)
            g["rows"][idx] = rows + (g["rows"][idx] - g["base"][idx])
            g["base"][idx] = rows


class EmbeddingBag(Embedding):
    """Embedding pooled per bag as nn.EmbeddingBag: forward(ids, offsets=None,
    per_sample_weights=None) with ids (B, L) (bags of L) or 1-D with offsets; mode 'sum' or
    'mean'. Returns (B, dim)."""

    def __init__(self, name, dim, mode="mean", **fields):
        if mode not in ("sum", "mean"):
            raise ValueError("mode: expected 'sum' or 'mean', got %r" % (mode,))
        super().__init__(name, dim, **fields)
        self.mode = mode

    def forward(self, ids, offsets=None, per_sample_weights=None):
        rows, inv = self._rows(ids)
        if offsets is not None and not isinstance(offsets, torch.Tensor):
            offsets = torch.as_tensor(np.asarray(offsets, dtype=np.int64))
        return F.embedding_bag(inv, rows, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights)


def _table_name(prefix, name):
    full = prefix + name
    if len(full) <= wharf._wharf.NAME_MAX and all(c.isalnum() or c in "_.-" for c in full):
        return full
    h = hashlib.sha1(full.encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() or c in "_.-" else "_" for c in full)
    return safe[: wharf._wharf.NAME_MAX - 11] + "-" + h


def _shape_of(n):
    """(rows, dim) for n floats: the widest dim up to MAX_DIM that divides n."""
    for d in range(min(n, wharf.MAX_DIM), 0, -1):
        if n % d == 0:
            return n // d, d
    return n, 1


def _init_of(p, seed):
    """The table initialiser drawing from what the module's values look like: zeros, a
    uniform range (flat histogram: excess kurtosis near -1.2) or a normal."""
    v = p.detach().double().reshape(-1)
    lo, hi = float(v.min()), float(v.max())
    if lo == hi == 0.0:
        return {"init": "zeros"}
    if lo == hi:
        return {"init": "uniform", "init_a": lo, "init_b": float(np.nextafter(np.float32(lo),
                                                                             np.float32(np.inf)))}
    mean, std = float(v.mean()), float(v.std())
    kurt = float(((v - mean) ** 4).mean() / std ** 4) - 3.0 if std > 0 else 0.0
    if kurt < -0.6:
        return {"init": "uniform", "init_a": lo, "init_b": hi, "seed": seed}
    return {"init": "normal", "init_a": mean, "init_b": std, "seed": seed}


class DenseSync:
    """The dense parameters of module (every parameter but the PS embeddings' own) on dense
    PS tables named prefix + the parameter's name, so every node declares the same tables.

    lr: the servers' SGD learning rate (GEO: the workers' local one); optimizer and other
    table fields (wharf.dense_table) may be given. The tables start from a draw of the
    distribution the module's initial values have (zeros, uniform or normal, from seed), as
    the C trainer's tables do; pull() makes every worker's module the PS's.
    """

    def __init__(self, module, lr, prefix="", seed=42, **fields):
        self.module = module
        self.lr = float(lr)
        self.steps = 0
        self.embeddings = [m for m in module.modules() if isinstance(m, Embedding)]
        skip = {id(m._anchor) for m in self.embeddings}
        self.params = []
        for i, (name, p) in enumerate(module.named_parameters()):
            if id(p) in skip:
                continue
            if p.dtype != torch.float32 or p.device.type != "cpu" or not p.is_contiguous():
                raise TypeError("%s: expected a contiguous float32 CPU parameter, got %s on %s"
                                % (name, p.dtype, p.device))
            rows, dim = _shape_of(p.numel())
            f = dict(_init_of(p, seed + i))
            f.setdefault("seed", seed + i)
            f.update(fields)
            t = wharf.dense_table(_table_name(prefix, name), rows, dim, lr=self.lr, **f)
            self.params.append((p, t))
        self._base = None

    def _mode(self):
        return wharf.mode()

    def pull(self):
        """Every parameter from the PS, in place (one request per table in flight at once)."""
        _wait_all(t.pull_async(out=p.data.numpy()) for p, t in self.params)
        if self._mode() == "geo":
            self._base = [p.detach().numpy().copy() for p, _ in self.params]

    def _push(self, arrays):
        _wait_all(t.push_async(a) for (_, t), a in zip(self.params, arrays) if a is not None)

    def step(self, scale=1.0):
        """After backward: hands this step's gradients (scaled by scale) to the PS and takes
        the new parameters; the gradients are consumed (set to None)."""
        for e in self.embeddings:
            e.flush()
        mode = self._mode()
        if mode == "geo":
            self._geo_step(scale)
        else:
            grads = []
            for p, _ in self.params:
                g = p.grad
                if g is not None and scale != 1.0:
                    g = g * scale
                grads.append(None if g is None else g.contiguous().numpy())
            self._push(grads)
            if mode == "sync":
                wharf.barrier(wharf.step())  # where the servers are (a restart resumes)
            self.pull()
        for p, _ in self.params:
            p.grad = None
        self.steps += 1

    def _geo_step(self, scale):
        with torch.no_grad():
            for p, _ in self.params:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-self.lr * scale)
        if (self.steps + 1) % wharf.geo_k() == 0:
            self._geo_sync()

    def _geo_sync(self):
        """Pushes 1/workers of each parameter's change since the last sync (its base moves
        with it), then takes the PS's values: parameter = value + (parameter - base)."""
        if self._base is None:
            self._base = [p.detach().numpy().copy() for p, _ in self.params]
        w = np.float32(wharf.num_workers())
        deltas = []
        for (p, _), b in zip(self.params, self._base):
            d = (p.detach().numpy() - b) / w
            b += d
            deltas.append(d)
        self._push(deltas)
        for e in self.embeddings:
            e.geo_sync()
        server = [np.empty_like(b) for b in self._base]
        _wait_all(t.pull_async(out=v) for (_, t), v in zip(self.params, server))
        with torch.no_grad():
            for (p, _), b, v in zip(self.params, self._base, server):
                a = p.detach().numpy()
                a[...] = v + (a - b)
                b[...] = v

    def finish(self):
        """The end of training: GEO syncs the steps since the last sync; then every
        parameter is pulled, so the module is the PS's model."""
        for e in self.embeddings:
            e.flush()
        if self._mode() == "geo" and self.steps % wharf.geo_k() != 0:
            self._geo_sync()
        self.pull()
