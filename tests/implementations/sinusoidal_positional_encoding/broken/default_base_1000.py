"""Right formula, wrong default: `base` defaults to 1000 instead of 10000, which only a layer built
with the defaults shows (every other check passes `base` explicitly)."""

import torch
from torch import nn

MAY_FAIL = ["function_default_base", "module_defaults"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=1000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even, got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)
    div = base ** (torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    pe = torch.zeros(max_seq_len, embedding_dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=1000.0):
        super().__init__()
        self.embedding_dim, self.max_seq_len, self.base = embedding_dim, max_seq_len, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        pe = self.pe if seq_len <= self.max_seq_len else sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        return x + pe[:seq_len].to(device=x.device, dtype=x.dtype)
