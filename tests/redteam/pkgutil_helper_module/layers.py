"""Loads a helper module beside it (copied into the worker with layers.py) through `pkgutil`, not an import,
so a scan that follows imports never reads it; the helper calls the library lookup. The load is the finding,
and the helper is scanned all the same (its use is reported as advice)."""

import pkgutil

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return pkgutil.resolve_name("quiet_helper:lookup")(token_ids, self.weight)

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "quiet_helper.py:7"}
