"""Seed-style: computed in the default dtype (not float64), frequencies as `exp(-log(base) * 2i / d)`, written with `pe[:, 0::2]` / `pe[:, 1::2]` slices.

Float32 angles lose precision at large positions (about 1e-4 absolute near
position 2000), so the grader's float32 tolerance must allow for it.
"""

import math

import torch
from torch import nn


def sinusoidal_positional_encoding(max_seq_len: int, embedding_dim: int, base: float = 10000.0) -> torch.Tensor:
    if embedding_dim % 2 != 0:
        raise ValueError("embedding_dim has to be even: every frequency contributes one sine and one cosine column")
    position = torch.arange(0, max_seq_len, dtype=torch.get_default_dtype()).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, embedding_dim, 2, dtype=torch.get_default_dtype()) * (-math.log(base) / embedding_dim))
    pe = torch.zeros(max_seq_len, embedding_dim)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim: int, max_seq_len: int = 2048, base: float = 10000.0):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.base = base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.shape[-2]
        pe = self.pe
        if seq_len > pe.shape[0]:
            pe = sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base).to(pe.device)
        return x + pe[:seq_len].to(x.dtype)
