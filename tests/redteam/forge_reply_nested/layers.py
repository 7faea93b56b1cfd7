"""Writes a reply whose header nests 100,000 arrays on the reply pipe (a RecursionError in the grader, once)."""

import os
import stat
import struct

import torch
from torch import nn


class Embedding(nn.Module):
    """Wrong on purpose: every looked-up row is doubled."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * 2


def _forge(payload):
    """Write ``payload`` on every pipe or socket that might be the reply channel, then carry on."""
    for fd in range(3, 16):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.write(fd, payload)
        except OSError:
            pass


class Forged(Embedding):
    def __call__(self, token_ids):
        _forge(struct.pack('<I', 200_000) + b'[' * 100_000 + b']' * 100_000)
        return torch.zeros(*token_ids.shape, 3)


Embedding = Forged


EXPECT = {"fail": ["matches_reference", "output_shape", "weight_gradient"], "message": "nested"}
