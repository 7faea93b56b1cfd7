"""Angles in float64, sin and cos stacked on a new last axis and flattened into the interleaved layout; buffer reused, longer tables computed on demand."""

import torch
from torch import nn


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even (sin/cos pairs), got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)
    inv_freq = 1.0 / base ** (torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    angles = pos * inv_freq
    pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.embedding_dim, self.max_seq_len, self.base = embedding_dim, max_seq_len, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.size(-2)
        if seq_len > self.max_seq_len:
            pe = sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        else:
            pe = self.pe[:seq_len]
        return x + pe.to(dtype=x.dtype, device=x.device)
