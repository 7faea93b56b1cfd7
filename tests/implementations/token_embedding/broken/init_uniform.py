"""Initialises uniform on [-3, 3] (right bounds, wrong distribution: std 1.73 instead of 0.99)."""

import torch
from torch import nn

MAY_FAIL = ["init_distribution"]
MESSAGES = {"init_distribution": "beyond 0 ± 2"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.uniform_(self.weight, -3.0, 3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
