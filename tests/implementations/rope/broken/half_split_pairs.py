"""Rotates the first half against the second half (x[i], x[i + d_k/2]): the GPT-NeoX layout, not this contract's adjacent pairs."""

MAY_FAIL = ["matches_reference", "other_theta", "batched_positions", "long_table", "bf16_values", "gradient",
            "integrity", "pair_norms_preserved", "other_leading_dims"]
MESSAGES = {"pair_norms_preserved": "adjacent pair"}

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
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        half = x.shape[-1] // 2
        first, second = x[..., :half], x[..., half:]
        out = torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)
        return out.to(x.dtype)

