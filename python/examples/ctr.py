#!/usr/bin/python3
"""A CTR model (sparse embeddings plus an MLP) trained with PyTorch over wharf's parameter server.

The data is wharf-train's CTR set: 26 categorical fields of Zipfian ids hashed to uint64 keys,
clicks drawn from a planted logistic model, so the test set's Bayes AUC (the planted
probabilities' AUC) is the mark: a worker prints test_auc, bayes_auc and auc_gap last.

The model is wide and deep: a sparse weight per id (the wide part, EmbeddingBag sum, dim 1),
a --k dim embedding per id concatenated over the fields into an MLP (the deep part), and a
bias. Both embedding tables and the MLP live on the servers (SGD; --lr-wide, --lr-emb, --lr);
learning rates fall as 1/(1 + epoch), as wharf-train's.

    python3 ctr.py --role ps     --ps 127.0.0.1:4444 --workers A,B --protocol kernel --mode async
    python3 ctr.py --role worker --task-index 0 --ps 127.0.0.1:4444 --workers A,B ...

options: --epochs N (3), --batch B (256 per worker), --samples N (300000 over all workers),
  --k K (8: the deep embedding's dim), --hidden H (32), --lr X (0.05: the MLP and bias),
  --lr-wide X (2.0), --lr-emb X (0.05), --seed S (1), --eal ARGS (protocol dpdk's EAL
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

OPTS = dict(epochs=3, batch=256, samples=300000, k=8, hidden=32, lr=0.05, lr_wide=2.0,
            lr_emb=0.05, seed=1)


class CTR(nn.Module):
    def __init__(self, o, fields):
        super().__init__()
        self.wide = wharf.torch.EmbeddingBag("ctr_wide", 1, mode="sum", lr=o.lr_wide)
        self.emb = wharf.torch.Embedding("ctr_emb", o.k, lr=o.lr_emb, init="normal",
                                         init_a=0.0, init_b=0.05, seed=7)
        self.mlp = nn.Sequential(nn.Linear(fields * o.k, o.hidden), nn.ReLU(),
                                 nn.Linear(o.hidden, 1))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, ids):
        deep = self.mlp(self.emb(ids).flatten(1))
        return (self.wide(ids) + deep).squeeze(1) + self.bias


def evaluate(model, keys, labels, batch):
    model.eval()
    scores = np.empty(len(keys), np.float32)
    loss = 0.0
    with torch.no_grad():
        for off in range(0, len(keys), batch):
            logit = model(keys[off:off + batch])
            y = torch.from_numpy(labels[off:off + batch])
            loss += F.binary_cross_entropy_with_logits(logit, y, reduction="sum").item()
            scores[off:off + batch] = torch.sigmoid(logit).numpy()
    model.train()
    return data.auc(scores, labels), loss / len(keys)


def train(o, model, ps):
    w, me = wharf.num_workers(), wharf.worker_index()
    keys, labels = data.ctr_train(o.samples, w, me, o.batch, o.seed)
    tkeys, tlabels, bayes = data.ctr_test()
    steps = len(keys) // o.batch
    bar = excommon.Progress(o.epochs, steps, o.batch)
    ps.pull()
    train_s = 0.0
    for e in range(o.epochs):
        scale = 1.0 / (1.0 + e)
        bar.start()
        t0 = time.time()
        loss_sum = 0.0
        for b in range(steps):
            kb = keys[b * o.batch:(b + 1) * o.batch]
            yb = torch.from_numpy(labels[b * o.batch:(b + 1) * o.batch])
            loss = F.binary_cross_entropy_with_logits(model(kb), yb)
            (loss * scale).backward()
            ps.step()
            loss_sum += loss.item()
            bar.show(e + 1, b + 1, loss_sum / (b + 1), 0.0)
        train_s += time.time() - t0
        bar.show(e + 1, steps, loss_sum / steps, 0.0, final=True)
    ps.finish()
    auc, tl = evaluate(model, tkeys, tlabels, o.batch)
    n = steps * o.epochs
    excommon.result(model="ctr-wide-deep", epochs=o.epochs, batch=o.batch, steps=n,
                    seconds=round(train_s, 2), samples_per_s=round(n * o.batch / train_s, 1),
                    test_auc=round(auc, 4), bayes_auc=round(bayes, 4),
                    auc_gap=round(bayes - auc, 4), test_loss=round(tl, 4))


def main():
    o, flags = excommon.parse(__doc__, OPTS)
    wharf.init(flags, eal=o.eal)
    torch.manual_seed(o.seed)
    model = CTR(o, data.CTR_FIELDS)
    ps = wharf.torch.DenseSync(model, lr=o.lr)
    if wharf.is_server():
        wharf.run_server()
    else:
        train(o, model, ps)
    wharf.stop()


if __name__ == "__main__":
    main()
