"""Computes the table in float64 and forgets to cast it: float64 whatever the default dtype.

The module casts the table to x's dtype in forward, so every value and output dtype is right; only the
function's own table is in the wrong dtype (twice the memory of the float32 table a caller expects).
"""

import torch
from torch import nn

MAY_FAIL = ["function_float32_table"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even: every frequency fills a (sin, cos) pair, got {embedding_dim}")
    positions = torch.arange(max_seq_len, dtype=torch.float64)[:, None]
    freqs = base ** (-torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    angles = positions * freqs
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.embedding_dim, self.max_seq_len, self.base = embedding_dim, max_seq_len, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        pe = self.pe if seq_len <= self.max_seq_len else sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        return x + pe[:seq_len].to(device=x.device, dtype=x.dtype)
