"""Float32 throughout: `p / base ** (2i / d)` with `torch.pow`, a float32 buffer added to inputs of any dtype.

At position 20000 the float32 angle is off by ~1e-3; the grader's tolerance
grows with the position, so the float32 formula itself is accepted. But adding a
float32 table to a bfloat16 (or float16) `x` promotes the result to float32,
where the contract asks for the dtype of x: a float64 input hid this (float64 wins
the promotion), a reduced-precision one shows it. Every other check passes.
"""

import torch
from torch import nn

MAY_FAIL = ["module_bfloat16_dtype"]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even (sin/cos pairs), got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float32)[:, None]
    two_i = torch.arange(0, embedding_dim, 2, dtype=torch.float32)
    angles = pos / torch.pow(torch.tensor(float(base)), two_i / embedding_dim)
    pe = torch.empty(max_seq_len, embedding_dim, dtype=torch.float32)
    pe[:, 0::2] = torch.sin(angles)
    pe[:, 1::2] = torch.cos(angles)
    return pe.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.d, self.base = embedding_dim, base
        self.register_buffer("table", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base).float())

    def forward(self, x):
        n = x.shape[-2]
        table = self.table if n <= self.table.shape[0] else sinusoidal_positional_encoding(n, self.d, self.base).to(x.device, torch.float32)
        return x + table[:n]
