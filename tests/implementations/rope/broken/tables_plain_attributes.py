"""Keeps the cos/sin tables as plain tensor attributes: right values wherever the layer is built, but
module.to(device) leaves them behind (on a GPU the first call fails; .half() keeps them float32)."""

BREAKS_EVERY_CALL_ON_A_DEVICE = True  # a tensor left on the CPU: on a GPU the first call fails
MAY_FAIL = ["tables_move_with_module"]
MESSAGES = {"tables_move_with_module": "register_buffer"}

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device) / d_k)
        angles = torch.arange(max_seq_len, device=device)[:, None] * inv_freq[None, :]
        self.cos = angles.cos()
        self.sin = angles.sin()

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return out.to(x.dtype)
