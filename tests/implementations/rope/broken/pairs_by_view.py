"""Reads the pairs in memory order with x.view(-1, 2): right for a contiguous x, a RuntimeError for a query or key
that arrives as a strided slice or a transposed view (heads split out of a projection are exactly that)."""

MAY_FAIL = ["input_views"]
MESSAGES = {"input_views": "view"}

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
        pairs = x.view(-1, 2)  # every adjacent pair, in memory order
        even = pairs[:, 0].reshape(*x.shape[:-1], -1)
        odd = pairs[:, 1].reshape(*x.shape[:-1], -1)
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)
