"""Float32 `p / base ** (2i / d)`, but the table for sequences past max_seq_len is built on the CPU.

The buffer follows the module to the GPU; the table made on the fly does not, so on CUDA
`x + table` mixes devices exactly when the sequence is longer than max_seq_len. Full marks on
the CPU; caught by module_extrapolates with --device cuda.
"""

MAY_FAIL = ["module_extrapolates", "module_large_positions"]  # on a GPU; full marks on the CPU

import torch
from torch import nn


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
        self.register_buffer("table", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base).float(),
                             persistent=False)

    def forward(self, x):
        n = x.shape[-2]
        table = self.table if n <= self.table.shape[0] else sinusoidal_positional_encoding(n, self.d, self.base).float()  # BUG: built on the CPU
        return x + table[:n].to(dtype=x.dtype)
