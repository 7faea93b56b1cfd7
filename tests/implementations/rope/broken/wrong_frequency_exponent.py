"""Frequencies theta^(-i/d_k) with i = 0 .. d_k/2-1: the exponent misses its factor 2."""

MAY_FAIL = ["matches_reference", "other_theta", "batched_positions", "long_table", "bf16_values", "gradient",
            "integrity", "other_leading_dims"]

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(d_k // 2, device=device) / d_k)
        angles = torch.arange(max_seq_len, device=device)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)

