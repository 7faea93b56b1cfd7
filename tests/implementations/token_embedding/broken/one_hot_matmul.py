"""Builds a one-hot matrix and multiplies: `F.one_hot(ids, V).to(w.dtype) @ w` costs tokens x vocab memory."""

import torch
import torch.nn.functional as F
from torch import nn

MAY_FAIL = ["memory_independent_of_vocab", "speed"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        one_hot = F.one_hot(token_ids.long(), self.num_embeddings).to(self.weight.dtype)
        return one_hot @ self.weight
