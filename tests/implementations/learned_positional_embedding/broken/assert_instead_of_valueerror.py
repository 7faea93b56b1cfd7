"""Guards the length with `assert`, which raises AssertionError (and vanishes under python -O) instead of ValueError."""

import torch
from torch import nn

MAY_FAIL = ["too_long_message", "too_long_raises"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        assert seq_len <= self.max_seq_len, f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}"
        return x + self.weight[:seq_len]
