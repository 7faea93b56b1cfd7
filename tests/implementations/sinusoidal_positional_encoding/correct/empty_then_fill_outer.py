"""`torch.outer` of positions and inverse frequencies in float64, written into an `empty` table through even/odd column views; module builds with `torch.no_grad` and extends its cache when a longer input arrives."""

import torch
from torch import nn


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError("sinusoidal encoding needs an even embedding_dim (each frequency is a sin/cos pair)")
    with torch.no_grad():
        exponent = torch.arange(embedding_dim // 2, dtype=torch.float64) * 2 / embedding_dim
        angle = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), base ** -exponent)
        table = torch.empty(max_seq_len, embedding_dim, dtype=torch.float64)
        table[:, ::2] = angle.sin()
        table[:, 1::2] = angle.cos()
    return table.to(torch.get_default_dtype())


class SinusoidalPositionalEncoding(nn.Module):
    def __init__(self, embedding_dim, max_seq_len=2048, base=10000.0):
        super().__init__()
        self.embedding_dim = embedding_dim
        self.base = base
        self.register_buffer("cache", sinusoidal_positional_encoding(max_seq_len, embedding_dim, base), persistent=False)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.cache.shape[0]:
            self.cache = sinusoidal_positional_encoding(seq_len, self.embedding_dim, self.base).to(self.cache.device)
        return x + self.cache[:seq_len].to(x.dtype)
