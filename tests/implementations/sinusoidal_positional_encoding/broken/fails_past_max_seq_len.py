"""The module only slices its precomputed table, so an input longer than max_seq_len fails to broadcast instead of extrapolating."""

import torch
from torch import nn

MAY_FAIL = ["module_bfloat16_dtype", "module_extrapolates", "module_float64_input", "module_keeps_graph", "module_large_positions",
            "module_shape", "module_uses_base", "module_values", "module_extrapolates_with_base",
            # the same bug, met again by a call past the table in a sequence of calls
            "module_calls_past_the_table", "no_leading_dims"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even (sin/cos pairs), got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64).unsqueeze(1)
    div = base ** (torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    pe = torch.zeros(max_seq_len, embedding_dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos / div)
    pe[:, 1::2] = torch.cos(pos / div)
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        return x + self.pe[: x.shape[-2]].to(x.dtype)
