"""Computes the angles in float16 to save memory: positions above 2048 are not even representable exactly."""

import torch
from torch import nn

MAY_FAIL = ["function_large_positions", "function_uses_base", "function_values", "module_extrapolates",
            "module_float64_input", "module_large_positions", "module_uses_base", "module_values", "module_extrapolates_with_base"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even, got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float16)[:, None]
    inv = torch.pow(float(base), -torch.arange(0, embedding_dim, 2, dtype=torch.float32) / embedding_dim).half()
    angles = (pos * inv).float()
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_seq_len, embedding_dim).to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.d, self.base = embedding_dim, base
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        n = x.shape[-2]
        pe = self.pe if n <= self.pe.shape[0] else sinusoidal_positional_encoding(n, self.d, self.base)
        return x + pe[:n].to(x)
