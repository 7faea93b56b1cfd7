"""Keeps the cos/sin tables as nn.Parameters with requires_grad=False: nothing trains them, but state_dict() saves
them like any parameter (every checkpoint carries them, and loading one into a layer of another max_seq_len fails)."""

MAY_FAIL = ["tables_not_in_state_dict"]
MESSAGES = {"tables_not_in_state_dict": "requires_grad=False"}

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device) / d_k)
        angles = torch.arange(max_seq_len, device=device)[:, None] * inv_freq[None, :]
        self.cos = nn.Parameter(angles.cos(), requires_grad=False)
        self.sin = nn.Parameter(angles.sin(), requires_grad=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)
