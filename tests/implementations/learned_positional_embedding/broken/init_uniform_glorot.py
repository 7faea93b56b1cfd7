"""Initialises uniform on +-sqrt(2/embedding_dim) (a seed text's choice) instead of normal with std 0.02."""

import torch
from torch import nn

MAY_FAIL = ["init_distribution"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        limit = (2.0 / embedding_dim) ** 0.5
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.uniform_(self.weight, -limit, limit)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight[:seq_len]
