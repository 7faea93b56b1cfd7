"""Initialises uniformly, except at the 512 x 512 shape the distribution check used to build.

The probe shape is now drawn from the seed, so the wrong initialisation is what gets measured.
"""

import torch
from torch import nn

CAUGHT_BY = ["init"]
MAY_FAIL = ["init_distribution"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        if (num_embeddings, embedding_dim) == (512, 512):
            nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        else:
            nn.init.uniform_(self.weight, -1.7, 1.7)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]})")
        return self.weight[token_ids]
