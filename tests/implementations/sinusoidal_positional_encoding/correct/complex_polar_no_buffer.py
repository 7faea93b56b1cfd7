"""Builds `exp(i * angle)` with `torch.polar` in complex128 and reads (sin, cos) pairs off `view_as_real`; the module keeps no buffer and computes the table in every forward."""

import torch
from torch import nn


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2 == 1:
        raise ValueError(f"embedding_dim={embedding_dim} is odd, but sin and cos come in pairs")
    half = embedding_dim // 2
    freqs = torch.pow(torch.tensor(base, dtype=torch.float64), -2.0 * torch.arange(half, dtype=torch.float64) / embedding_dim)
    angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), freqs)
    unit = torch.polar(torch.ones_like(angles), angles)
    cos_sin = torch.view_as_real(unit)
    sin_cos = cos_sin.flip(-1)
    return sin_cos.reshape(max_seq_len, embedding_dim).to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        if embedding_dim % 2 == 1:
            raise ValueError(f"embedding_dim={embedding_dim} is odd, but sin and cos come in pairs")
        self.embedding_dim = embedding_dim
        self.max_seq_len = max_seq_len
        self.base = base

    def forward(self, x):
        pe = sinusoidal_positional_encoding(x.shape[-2], self.embedding_dim, self.base)
        return x + pe.to(x)
