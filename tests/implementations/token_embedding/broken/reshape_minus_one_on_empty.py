"""Restores the shape with `reshape(*token_ids.shape, -1)`, which cannot infer -1 for a zero-size input."""

import torch
from torch import nn

MAY_FAIL = ["zero_size_ids"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        flat = token_ids.reshape(-1)
        if ((flat < 0) | (flat >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight.index_select(0, flat).reshape(*token_ids.shape, -1)
