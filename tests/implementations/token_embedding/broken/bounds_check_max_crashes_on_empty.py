"""Checks the range with `token_ids.max()` / `.min()`, which raise on a zero-size tensor."""

import torch
from torch import nn

MAY_FAIL = ["zero_size_ids"]
MESSAGES = {"zero_size_ids": "at bounds_check_max_crashes_on_empty.py:"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if token_ids.max() >= self.num_embeddings or token_ids.min() < 0:
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
