"""Initialises the table with std 1 (the token-embedding habit) instead of 0.02."""

import torch
from torch import nn

MAY_FAIL = ["init_distribution"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=1.0)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight[:seq_len]
