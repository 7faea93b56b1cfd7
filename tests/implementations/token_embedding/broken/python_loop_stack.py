"""Looks up one token at a time in a Python loop and `torch.stack`s the rows: the op count grows with the number of tokens."""

import torch
from torch import nn

MAY_FAIL = ["speed", "vectorised"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        flat = token_ids.reshape(-1)
        if flat.numel() == 0:
            return self.weight[token_ids]
        rows = [self.weight[int(i)] for i in flat]
        return torch.stack(rows).reshape(*token_ids.shape, self.embedding_dim)
