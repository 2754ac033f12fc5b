#!/usr/bin/python3
"""The Fashion-MNIST MLP (784-128-10) trained with PyTorch over wharf's parameter server.

One script for both roles, as wharf-train: a server serves the MLP's tables, a worker trains
on every W-th training image and prints one JSON line last (test_accuracy, samples_per_s).

    python3 mlp_fmnist.py --role ps --ps 127.0.0.1:4444 --workers A,B --protocol kernel \\
        --mode sync
    python3 mlp_fmnist.py --role worker --task-index 0 --ps 127.0.0.1:4444 --workers A,B \\
        --protocol kernel --mode sync --epochs 10

What changes against a plain PyTorch script: wharf.init, DenseSync (the PS is the optimizer:
ps.pull() before training, ps.step() after each backward, ps.finish() at the end) and the
role test. The step is wharf-train's: mean cross-entropy, the servers' SGD at --lr on the sum
of the workers' gradients (sync), the last --decay-epochs at 0.3x.

options: --epochs N (10), --batch B (64 per worker), --lr X (0.1), --hidden H (128),
  --train-limit N / --test-limit N (the first N images; 0: all), --decay-epochs N (2),
  --seed S (1), --data-dir DIR (Debian's Fashion-MNIST), --eal ARGS (protocol dpdk's EAL
  arguments; default $WHARF_EAL_ARGS)
"""
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import excommon
import wharf
import wharf.torch
from wharf import data

OPTS = dict(epochs=10, batch=64, lr=0.1, hidden=128, train_limit=0, test_limit=0,
            decay_epochs=2, seed=1, data_dir="")


def evaluate(model, x, y):
    with torch.no_grad():
        out = model(torch.from_numpy(x))
        loss = F.cross_entropy(out, torch.from_numpy(y)).item()
        acc = (out.argmax(1).numpy() == y).mean()
    return float(acc), loss


def train(o, model, ps):
    x, y = data.fashion_mnist(True, o.train_limit, o.data_dir or None)
    xt, yt = data.fashion_mnist(False, o.test_limit, o.data_dir or None)
    w, me = wharf.num_workers(), wharf.worker_index()
    mine = np.arange(me, len(x), w)
    steps = len(x) // (w * o.batch)  # the same on every worker (sync barriers)
    if steps == 0:
        raise SystemExit("%d training images are fewer than one batch of %d per worker" %
                         (len(x), o.batch))
    rng = np.random.default_rng(o.seed * 7919 + me)
    bar = excommon.Progress(o.epochs, steps, o.batch)
    model.train()
    ps.pull()
    train_s = 0.0
    timed = 0  # steps in train_s: all but the first, whose barrier waits for every worker's start-up
    for e in range(o.epochs):
        scale = 0.3 if o.epochs > o.decay_epochs and e + o.decay_epochs >= o.epochs else 1.0
        order = rng.permutation(mine)
        bar.start()
        t0 = time.time()
        loss_sum = corr = 0.0
        for b in range(steps):
            idx = order[b * o.batch:(b + 1) * o.batch]
            xb, yb = torch.from_numpy(x[idx]), torch.from_numpy(y[idx])
            out = model(xb)
            loss = F.cross_entropy(out, yb)
            loss.backward()
            ps.step(scale)
            loss_sum += loss.item()
            corr += (out.argmax(1) == yb).sum().item()
            bar.show(e + 1, b + 1, loss_sum / (b + 1), corr / ((b + 1) * o.batch))
            if e == 0 and b == 0:
                t0 = time.time()
            else:
                timed += 1
        train_s += time.time() - t0
        bar.show(e + 1, steps, loss_sum / steps, corr / (steps * o.batch), final=True)
        if me == 0:
            acc, tl = evaluate(model, xt, yt)
            print("          test accuracy %.4f  test loss %.4f" % (acc, tl), flush=True)
    ps.finish()
    acc, tl = evaluate(model, xt, yt)
    n = steps * o.epochs
    excommon.result(model="mlp", epochs=o.epochs, batch=o.batch, steps=n,
                    samples=n * o.batch, seconds=round(train_s, 2),
                    samples_per_s=round(timed * o.batch / train_s, 1) if timed else 0.0,
                    test_accuracy=round(acc, 4),
                    test_loss=round(tl, 4))


def main():
    o, flags = excommon.parse(__doc__, OPTS)
    wharf.init(flags, eal=o.eal)
    torch.manual_seed(o.seed)
    model = nn.Sequential(nn.Linear(784, o.hidden), nn.ReLU(), nn.Linear(o.hidden, 10))
    ps = wharf.torch.DenseSync(model, lr=o.lr)
    if wharf.is_server():
        wharf.run_server()
    else:
        train(o, model, ps)
    wharf.stop()


if __name__ == "__main__":
    main()
