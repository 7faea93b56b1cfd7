"""Tables computed and kept in float64 (the most accurate choice): the rotation runs in float64 and the
result is cast back to the dtype of x, so a bfloat16 x still gives a bfloat16 output."""

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device, dtype=torch.float64) / d_k)
        angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float64), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        even, odd = x[..., 0::2].double(), x[..., 1::2].double()
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2).to(x.dtype)
