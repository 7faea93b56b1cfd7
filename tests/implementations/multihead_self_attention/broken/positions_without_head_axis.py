"""RoPE applied to queries of shape (..., heads, seq, d_head) with the positions as given, as several real students'
MHAs do: (seq_len,) and (1, seq_len) positions broadcast over the heads, (batch, seq_len) ones line the batch up
with the heads axis and raise (or, where batch equals the number of heads, rotate by the wrong row)."""

import math

import torch
from torch import nn

MAY_FAIL = ["batched_positions"]


class Proj(nn.Module):
    def __init__(self, d, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d, device=device, dtype=dtype) / math.sqrt(d))


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        self.h, self.dh = num_heads, d_model // num_heads
        self.q_proj, self.k_proj = Proj(d_model, device, dtype), Proj(d_model, device, dtype)
        self.v_proj, self.output_proj = Proj(d_model, device, dtype), Proj(d_model, device, dtype)
        self.theta = theta
        if theta is not None:
            inv = theta ** (-torch.arange(0, self.dh, 2, device=device, dtype=torch.float32) / self.dh)
            angles = torch.outer(torch.arange(max_seq_len, device=device, dtype=torch.float32), inv)
            self.register_buffer("cos", angles.cos(), persistent=False)
            self.register_buffer("sin", angles.sin(), persistent=False)

    def rotate(self, t, pos):
        c, s = self.cos[pos].to(t.dtype), self.sin[pos].to(t.dtype)
        even, odd = t[..., 0::2], t[..., 1::2]
        return torch.stack((even * c - odd * s, even * s + odd * c), -1).flatten(-2)

    def forward(self, x, token_positions=None):
        seq = x.shape[-2]
        lead = x.shape[:-2]

        def split(w):
            return (x @ w.weight.T).reshape(*lead, seq, self.h, self.dh).transpose(-3, -2)

        q, k, v = split(self.q_proj), split(self.k_proj), split(self.v_proj)
        if self.theta is not None:
            pos = torch.arange(seq, device=x.device) if token_positions is None else token_positions
            q, k = self.rotate(q, pos), self.rotate(k, pos)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.dh)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        scores = scores - scores.amax(-1, keepdim=True)
        weights = scores.exp()
        weights = weights / weights.sum(-1, keepdim=True)
        out = (weights @ v).transpose(-3, -2).reshape(*lead, seq, self.h * self.dh)
        return out @ self.output_proj.weight.T
