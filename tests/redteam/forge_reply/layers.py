"""Writes forged replies straight onto the response pipe, claiming success with made-up tensors.

The grader reads plain data and computes the verdict itself, so a forged reply can at most
carry wrong values (or garble the stream, which is reported as a protocol failure).
"""

import os

import torch

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
        from validator.worker.protocol import write_message

        fake = {"ok": True, "output": torch.zeros(*token_ids.shape, 3), "seconds": 0.0}
        for fd in range(3, 12):
            try:
                write_message(fd, fake)
                os.write(fd, b"\xff" * 64)
            except OSError:
                pass
        return torch.zeros(*token_ids.shape, 3)


EXPECT = {"fail": ["matches_reference", "weight_gradient"]}
