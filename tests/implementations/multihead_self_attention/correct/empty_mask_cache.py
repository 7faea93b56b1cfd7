"""Caches the causal mask in a buffer that starts empty (torch.empty(0, 0), made without device=) and is rebuilt
on the input's device whenever a longer sequence comes, as a real student's MHA does: an empty tensor holds
nothing to place, so device="meta" is still honoured by everything the layer holds."""

import math

import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self, d_in, d_out, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (d_in + d_out))
        self.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(d_out, d_in, device=device, dtype=dtype),
                                                         std=std, a=-3 * std, b=3 * std))

    def forward(self, x):
        return x @ self.weight.T


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        self.h, self.dh = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = Linear(d_model, d_model, device, dtype), Linear(d_model, d_model, device, dtype)
        self.v_proj, self.output_proj = Linear(d_model, d_model, device, dtype), Linear(d_model, d_model, device, dtype)
        self.register_buffer("_mask", torch.empty(0, 0, dtype=torch.bool), persistent=False)
        self.theta = theta
        if theta is not None:
            inv = 1.0 / theta ** (torch.arange(0, self.dh, 2, device=device, dtype=torch.float32) / self.dh)
            angles = torch.arange(max_seq_len, device=device, dtype=torch.float32)[:, None] * inv
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

    def mask(self, seq, device):
        if self._mask.shape[0] < seq or self._mask.device != device:
            self._mask = torch.ones(seq, seq, dtype=torch.bool, device=device).tril()
        return self._mask[:seq, :seq]

    def rotate(self, t, pos):
        c, s = self.cos[pos].to(t.dtype), self.sin[pos].to(t.dtype)
        even, odd = t[..., 0::2], t[..., 1::2]
        return torch.stack((even * c - odd * s, even * s + odd * c), -1).flatten(-2)

    def forward(self, x, token_positions=None):
        *lead, seq, d = x.shape

        def heads(t):
            return t.reshape(*lead, seq, self.h, self.dh).transpose(-3, -2)

        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if self.theta is not None:
            pos = torch.arange(seq, device=x.device) if token_positions is None else token_positions
            pos = pos.unsqueeze(-2)
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
        scores = scores.masked_fill(~self.mask(seq, x.device), float("-inf"))
        scores = scores - scores.amax(-1, keepdim=True)
        w = scores.exp()
        out = (w / w.sum(-1, keepdim=True)) @ v
        return self.output_proj(out.transpose(-3, -2).reshape(*lead, seq, d))
