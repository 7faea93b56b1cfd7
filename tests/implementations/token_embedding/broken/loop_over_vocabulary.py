"""Loops over the vocabulary instead of the tokens: one masked fill of the row index per row of the table.

The op count does not grow with the number of tokens, only with the vocabulary, which op
counting now grows too.
"""

import torch
from torch import nn

CAUGHT_BY = ["performance"]
CAUGHT_BY_CHECKS = ["vectorised"]
MAY_FAIL = ["vectorised", "memory_independent_of_vocab", "speed"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]})")
        flat = token_ids.reshape(-1)
        rows = torch.zeros_like(flat, dtype=torch.long)
        for v in range(1, self.weight.shape[0]):
            rows.masked_fill_(flat == v, v)
        return self.weight[rows].reshape(*token_ids.shape, self.weight.shape[1])
