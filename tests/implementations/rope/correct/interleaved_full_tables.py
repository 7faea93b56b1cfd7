"""Tables of width d_k (each cos/sin repeated for both members of a pair) and a pairwise swap."""

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        self.d_k = d_k
        freqs = torch.pow(torch.tensor(float(theta)), -torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)
        pos = torch.arange(max_seq_len, dtype=torch.float32)
        ang = (pos[:, None] * freqs[None, :]).repeat_interleave(2, dim=-1)
        self.register_buffer("cos", ang.cos().to(device), persistent=False)
        self.register_buffer("sin", ang.sin().to(device), persistent=False)

    def forward(self, x, token_positions):
        swapped = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)
        cos = self.cos[token_positions]
        sin = self.sin[token_positions]
        return (x * cos + swapped * sin).to(x.dtype)
