"""Runs the library lookup from a string through `code.InteractiveInterpreter().runsource`, which the scan
cannot read. Using a code-running module is itself the finding."""

import code

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
        shell = code.InteractiveInterpreter({"ids": token_ids, "w": self.weight})
        shell.runsource("import torch.nn.functional as F; out = F.embedding(ids, w)")
        return shell.locals["out"]

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "code.InteractiveInterpreter"}
