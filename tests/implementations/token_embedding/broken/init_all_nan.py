"""Fills the table with NaN: two such tables are not `equal`, so "two consecutive layers differ" used to pass."""

import torch
from torch import nn

CAUGHT_BY = ["init"]
CAUGHT_BY_CHECKS = ["init_independent"]
MAY_FAIL = ["init_distribution", "init_independent", "init_reproducible"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.full((num_embeddings, embedding_dim), float("nan"), device=device,
                                              dtype=dtype))

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]})")
        return self.weight[token_ids]
