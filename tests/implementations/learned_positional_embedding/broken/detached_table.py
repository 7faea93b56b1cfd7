"""Adds `self.weight.data[:seq_len]`: the output is right but the position table never receives gradient."""

import torch
from torch import nn

MAY_FAIL = ["gradcheck", "gradient", "unused_rows_zero"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight.data[:seq_len]
