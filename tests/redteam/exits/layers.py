"""Ends the worker every way Python allows: SystemExit, KeyboardInterrupt, os._exit, a BaseException."""

import os

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

    _calls = [0]

    def __call__(self, token_ids):
        self._calls[0] += 1
        n = self._calls[0] % 4
        if n == 0:
            raise SystemExit(0)
        if n == 1:
            raise KeyboardInterrupt
        if n == 2:
            os._exit(0)

        class Sneaky(BaseException):
            def __str__(self):
                raise SystemExit("no message for you")

        raise Sneaky()


EXPECT = {"fail": ["matches_reference", "output_shape", "weight_gradient"]}
