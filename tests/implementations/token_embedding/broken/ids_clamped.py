"""Clamps token IDs into [0, num_embeddings - 1] instead of raising: out-of-range IDs silently read the last row."""

import torch
from torch import nn

MAY_FAIL = ["id_too_large_raises", "several_ids_too_large_raise"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        safe = token_ids.clamp(0, self.num_embeddings - 1)
        return self.weight[safe]
