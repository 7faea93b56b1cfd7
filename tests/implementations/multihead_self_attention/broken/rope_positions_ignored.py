"""Uses 0 .. seq_len-1 as positions even when token_positions is given."""

import math

import torch
from torch import nn

MAY_FAIL = ["with_rope", "gradient", "batched_positions", "unbatched_positions", "other_leading_dims"]
MESSAGES = {"with_rope": "the token_positions passed in are ignored",
            "batched_positions": "the token_positions passed in are ignored"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        return x @ self.weight.T


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv_freq = theta ** (-torch.arange(0, d_k, 2, device=device) / d_k)
        angles = torch.arange(max_seq_len, device=device)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions], self.sin[token_positions]
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2).to(x.dtype)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.rope = RotaryPositionalEmbedding(theta, self.d_head, max_seq_len, device) if theta is not None else None

    def split(self, t):
        *lead, seq, d = t.shape
        return t.reshape(*lead, seq, self.num_heads, self.d_head).transpose(-3, -2)

    def forward(self, x, token_positions=None):
        *lead, seq, d = x.shape
        q, k, v = self.split(self.q_proj(x)), self.split(self.k_proj(x)), self.split(self.v_proj(x))
        if self.rope is not None:
            token_positions = torch.arange(seq, device=x.device)
            pos = token_positions.unsqueeze(-2)
            q, k = self.rope(q, pos), self.rope(k, pos)
        mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        out = scaled_dot_product_attention(q, k, v, mask)
        return self.output_proj(out.transpose(-3, -2).reshape(*lead, seq, d))
