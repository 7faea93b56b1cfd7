"""Names the bad ID with `int(ids[bad])`: right for one out-of-range ID, but two of them make `int()`
raise RuntimeError (a 2-element tensor is not a scalar) instead of IndexError."""

import torch
from torch import nn

MAY_FAIL = ["several_ids_too_large_raise"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        bad = (token_ids < 0) | (token_ids >= self.weight.shape[0])
        if bad.any():
            raise IndexError(f"token id {int(token_ids[bad])} is out of range [0, {self.weight.shape[0]})")
        return self.weight[token_ids]
