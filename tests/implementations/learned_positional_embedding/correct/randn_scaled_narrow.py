"""Initialises with `torch.randn(...) * 0.02` in the factory call; selects rows with `narrow` and adds through `expand_as`."""

import torch
from torch import nn


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.randn(max_seq_len, embedding_dim, device=device, dtype=dtype) * 0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(f"input has {seq_len} positions, the table only {self.max_seq_len}")
        positions = self.weight.narrow(0, 0, seq_len)
        return x + positions.expand_as(x)
