"""The model of the tests' cluster: every node (the PS in ps_node.py, the pytest worker)
declares the same tables, since servers and workers compare the model's digest."""
import torch
from torch import nn

import wharf
import wharf.torch

EMB_LR = 0.5
W_LR = 0.25
BAG_LR = 0.5
LIN_LR = 0.125


def declare():
    """Declares the tables; returns the PyTorch modules whose tables they are."""
    wharf.sparse_table("emb", dim=4, lr=EMB_LR)
    wharf.sparse_table("ledger", dim=1, lr=1.0)  # SGD lr 1, zeros: pushing -1 adds exactly 1
    wharf.sparse_table("init", dim=3, init="uniform", init_a=-1.0, init_b=1.0, seed=5)
    wharf.dense_table("w", rows=3, dim=5, lr=W_LR)
    # A memory policy: 64 rows at most (4 on each of the PS's 16 shards). Servers apply it;
    # it is not in the digest.
    wharf.sparse_table("capped", dim=1, lr=1.0, max_rows=64)
    torch.manual_seed(3)
    bag = wharf.torch.EmbeddingBag("tbag", 4, mode="sum", lr=BAG_LR)
    lin = nn.Linear(4, 2)
    ps = wharf.torch.DenseSync(lin, lr=LIN_LR, prefix="lin.")
    return bag, lin, ps
