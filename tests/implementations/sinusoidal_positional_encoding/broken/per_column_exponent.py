"""Gives every column its own exponent j/d (`base ** (arange(d) / d)`), so the cosine column 2i+1 uses (2i+1)/d instead of sharing 2i/d with its sine."""

import torch
from torch import nn

MAY_FAIL = ["function_large_positions", "function_uses_base", "function_values", "module_extrapolates",
            "module_float64_input", "module_large_positions", "module_uses_base", "module_values", "module_extrapolates_with_base"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even (sin/cos pairs), got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)
    div = base ** (torch.arange(embedding_dim, dtype=torch.float64) / embedding_dim)
    angles = pos / div
    pe = torch.zeros(max_seq_len, embedding_dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angles[:, 0::2])
    pe[:, 1::2] = torch.cos(angles[:, 1::2])
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.embedding_dim, self.max_seq_len, self.base = embedding_dim, max_seq_len, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        pe = self.pe if seq_len <= self.max_seq_len else sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base)
        return x + pe[:seq_len].to(device=x.device, dtype=x.dtype)
