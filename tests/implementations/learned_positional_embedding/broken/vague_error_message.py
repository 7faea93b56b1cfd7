"""Raises ValueError past max_seq_len, but the message names neither the sequence length nor the limit."""

import torch
from torch import nn

MAY_FAIL = ["too_long_message"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError("sequence too long")
        return x + self.weight[:seq_len]
