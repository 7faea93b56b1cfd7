"""RoPE as complex multiplication: each adjacent pair is one complex number, times e^(i angle)."""

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = 1.0 / (theta ** (torch.arange(0, d_k, 2, device=device).float() / d_k))
        angles = torch.outer(torch.arange(max_seq_len, device=device).float(), inv_freq)
        self.register_buffer("cos_table", torch.cos(angles), persistent=False)
        self.register_buffer("sin_table", torch.sin(angles), persistent=False)

    def forward(self, x, token_positions):
        rot = torch.complex(self.cos_table[token_positions], self.sin_table[token_positions])
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())
        out = torch.view_as_real(pairs * rot).flatten(-2)
        return out.to(x.dtype)
