"""Ignores token_positions and rotates by the index in the sequence (0 .. seq_len-1)."""

MAY_FAIL = ["matches_reference", "other_theta", "batched_positions", "long_table", "bf16_values", "gradient",
            "integrity", "other_leading_dims"]
MESSAGES = {"matches_reference": "the token_positions passed in are ignored",
            "batched_positions": "the token_positions passed in are ignored"}

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device) / d_k)
        angles = torch.arange(max_seq_len, device=device)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        seq = x.shape[-2]
        cos, sin = self.cos[:seq], self.sin[:seq]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)

