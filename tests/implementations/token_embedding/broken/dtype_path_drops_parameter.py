"""Converts the weight with `.to(dtype)` after wrapping it: with a dtype, `weight` is no longer a Parameter."""

import torch
from torch import nn

MAY_FAIL = ["honours_dtype"]
MESSAGES = {"honours_dtype": "is a plain tensor here"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device))
        nn.init.trunc_normal_(weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        self.weight = weight if dtype is None else weight.to(dtype)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
