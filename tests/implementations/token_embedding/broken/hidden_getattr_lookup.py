"""Reaches the library lookup kernel through `getattr(torch.nn.functional, "embed" + "ding")`, hidden from a source scan.

Only a runtime check (the kernel shows up in the dispatched ops) can see it.
"""

import torch
from torch import nn

MAY_FAIL = ["no_library_embedding_runtime", "no_library_embedding_source"]

_LOOKUP = getattr(torch.nn.functional, "embed" + "ding")


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return _LOOKUP(token_ids, self.weight)
