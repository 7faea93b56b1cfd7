"""RoPE with explicit 2x2 rotation matrices and einsum; tables in the default dtype."""

import torch
from torch import nn


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        i = torch.arange(d_k // 2, device=device)
        freq = theta ** (-2 * i / d_k)
        angle = torch.arange(max_seq_len, device=device)[:, None] * freq[None, :]
        c, s = torch.cos(angle), torch.sin(angle)
        rot = torch.stack((torch.stack((c, -s), -1), torch.stack((s, c), -1)), -2)  # (max, d/2, 2, 2)
        self.register_buffer("rot", rot, persistent=False)

    def forward(self, x, token_positions):
        r = self.rot[token_positions].to(x.dtype)
        pairs = x.unflatten(-1, (-1, 2))
        return torch.einsum("...ij,...j->...i", r, pairs).flatten(-2)
