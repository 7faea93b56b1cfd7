"""Hides the finding in code that runs at import but that the layer never names: the decorator of an unused
function runs `timeit` setup code, which fetches the library lookup into a table the layer reads. What defining
a name runs at import (decorators, default values, class bodies, computed module values) is the layer's code."""

import timeit

import torch
from torch import nn

_TABLE = {}


def _register(function):
    timeit.Timer(setup="import torch.nn.functional as F; table['lookup'] = F.embedding",
                 globals={"table": _TABLE}).timeit(1)
    return function


@_register
def _never_called():
    pass


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return _TABLE["lookup"](token_ids, self.weight)

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "layers.py:14"}
