"""Truncated normal drawn through the inverse CDF by hand; logits with `torch.einsum("...d,vd->...v")` on the shared weight."""

import math

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        lo = 0.5 * (1 + math.erf(-3.0 / math.sqrt(2)))
        hi = 0.5 * (1 + math.erf(3.0 / math.sqrt(2)))
        with torch.no_grad():
            self.weight.uniform_(2 * lo - 1, 2 * hi - 1).erfinv_().mul_(math.sqrt(2)).clamp_(-3.0, 3.0)

    def forward(self, token_ids):
        if (token_ids < 0).any() or (token_ids >= self.weight.shape[0]).any():
            raise IndexError(f"ids must be in [0, {self.weight.shape[0]})")
        return self.weight[token_ids]


class TiedEmbeddingLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = nn.Module()
        self.lm_head.weight = self.embedding.weight

    def forward(self, token_ids):
        h = self.embedding(token_ids)
        return torch.einsum("...d,vd->...v", h, self.lm_head.weight)
