"""A correct embedding that forks carelessly, as students do (a child that is never told to exit).

On its first call forward forks; the child returns the same, right result as the parent
and falls back into the worker's loop. It must not be taken for a forgery: the worker
hands a forked child /dev/null in place of the grader's channel, so it reads the end of
input and exits, and only the worker answers. (The source check still flags ``os.fork``
for review: that is its job; the values must pass.)
"""

import os

import torch
from torch import nn

_FORKED = []


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if not _FORKED:
            _FORKED.append(os.fork())
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids]


EXPECT = {"passes": ["output_shape", "matches_reference", "weight_gradient", "init_distribution"],
          "absent": ["forged", "died"]}
