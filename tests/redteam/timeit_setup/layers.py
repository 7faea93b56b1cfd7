"""Runs the library lookup from a string: `timeit.Timer(setup=...)` compiles and runs its setup code, which
the scan cannot read. Using a code-running module is itself the finding."""

import timeit

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
        box = {"ids": token_ids, "w": self.weight}
        timeit.Timer(setup="import torch.nn.functional as F; box['out'] = F.embedding(box['ids'], box['w'])",
                     globals={"box": box}).timeit(1)
        return box["out"]

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "timeit.Timer"}
