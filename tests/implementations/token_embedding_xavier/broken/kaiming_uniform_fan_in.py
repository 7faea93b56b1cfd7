"""Kaiming-uniform with fan_in = embedding_dim: bound sqrt(6 / d), too wide for Glorot."""

import math

import torch
from torch import nn

MAY_FAIL = ["init_distribution"]


class XavierEmbedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        bound = math.sqrt(6.0 / embedding_dim)
        with torch.no_grad():
            self.weight.uniform_(-bound, bound)

    def forward(self, token_ids):
        n = self.weight.shape[0]
        if ((token_ids < 0) | (token_ids >= n)).any():
            raise IndexError(f"token ids must lie in [0, {n})")
        return self.weight[token_ids]
