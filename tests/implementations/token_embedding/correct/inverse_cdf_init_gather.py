"""Truncated normal drawn by hand through the inverse CDF (`torch.erfinv`); lookup with `torch.gather`."""

import math

import torch
from torch import nn


def _trunc_normal_inverse_cdf_(tensor, a=-3.0, b=3.0):
    def cdf(x):
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    with torch.no_grad():
        tensor.uniform_(cdf(a), cdf(b))
        tensor.mul_(2.0).sub_(1.0).erfinv_().mul_(math.sqrt(2.0))
        tensor.clamp_(a, b)
    return tensor


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        weight = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        self.weight = nn.Parameter(_trunc_normal_inverse_cdf_(weight))

    def forward(self, token_ids):
        if token_ids.lt(0).any() or token_ids.ge(self.num_embeddings).any():
            raise IndexError(f"every token id must be in [0, {self.num_embeddings})")
        index = token_ids.reshape(-1, 1).long().expand(-1, self.embedding_dim)
        rows = torch.gather(self.weight, 0, index)
        return rows.reshape(token_ids.shape + (self.embedding_dim,))
