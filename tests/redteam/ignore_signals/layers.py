"""Ignores every signal it can and sleeps in forward, hoping the grader cannot stop it."""

import signal
import time

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

    def __call__(self, token_ids):
        time.sleep(3600)

for _sig in signal.valid_signals():
    try:
        signal.signal(_sig, signal.SIG_IGN)
    except (OSError, ValueError, RuntimeError):
        pass


EXPECT = {"fail": ["matches_reference", "output_shape"], "message": "wall time"}
