"""Adds a head axis to the looked-up tables whenever x is 4-D (`if x.ndim == 4: cos = cos.unsqueeze(1)`), as a real
student's RoPE does: right for attention's (batch, heads, seq_len, d_k) with (batch, seq_len) positions, and for
(batch, seq_len, d_k) x, which the ordinary checks pass as the course's test does; with (seq_len,) positions and two
leading dims the tables become (seq_len, 1, d_k/2), which does not broadcast. Only other_leading_dims tries that."""

import torch
from torch import nn

MAY_FAIL = ["other_leading_dims"]
MESSAGES = {"other_leading_dims": "cos.unsqueeze(1)"}


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device, dtype=torch.float32) / d_k)
        angles = torch.arange(max_seq_len, device=device, dtype=torch.float32)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]  # (..., seq_len, d_k / 2)
        if x.ndim == 4:  # (batch, heads, seq, d_k) with (batch, seq) positions: make room for the heads
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        even, odd = x[..., 0::2].float(), x[..., 1::2].float()
        rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)
        return rotated.to(x.dtype)
