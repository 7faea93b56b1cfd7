"""Reaches the library lookup through a module kept in a variable and a name built at run time:
`getattr(alias, "embed" + "ding")`. The scan must judge the lookup on a module, not skip a name it cannot read."""

import torch
from torch import nn

alias = torch.nn.functional


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return getattr(alias, "embed" + "ding")(token_ids, self.weight)

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "layers.py:20"}
