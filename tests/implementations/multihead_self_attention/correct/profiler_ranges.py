"""Each step of the forward in a named profiler range (`record_function`, as a real repository marks its attention's
steps for its own profiling): no construct the source scan refuses, and the grader's profiler cross-check reads a
student's range as the range it is (the op counts, library bans and evidence checks all pass)."""

import math

import torch
from torch import nn
from torch.profiler import record_function

F32_TABLES = True    # RoPE tables computed and kept in float32
F32_SOFTMAX = False  # softmax in the input's dtype


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        return x @ self.weight.T


def softmax(x, dim):
    in_dtype = x.dtype
    if F32_SOFTMAX:
        x = x.to(torch.float32)
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(in_dtype)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V


class RotaryPositionalEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        kw = {"dtype": torch.float32} if F32_TABLES else {}
        inv_freq = 1.0 / theta ** (torch.arange(0, d_k, 2, device=device, **kw) / d_k)
        angles = torch.arange(max_seq_len, device=device, **kw)[:, None] * inv_freq[None, :]
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos, sin = self.cos[token_positions].to(x.dtype), self.sin[token_positions].to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.q_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.k_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.v_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.output_proj = Linear(d_model, d_model, device=device, dtype=dtype)
        self.use_rope = theta is not None
        self.rope = RotaryPositionalEmbedding(theta or 10000.0, self.d_head, max_seq_len or 64, device)

    def split(self, t):
        *lead, seq, d = t.shape
        return t.reshape(*lead, seq, self.num_heads, self.d_head).transpose(-3, -2)

    def forward(self, x, token_positions=None):
        *lead, seq, d = x.shape
        with record_function("qkv_proj"):
            q, k, v = self.split(self.q_proj(x)), self.split(self.k_proj(x)), self.split(self.v_proj(x))
        if self.use_rope:
            with torch.autograd.profiler.record_function("rope"):
                if token_positions is None:
                    token_positions = torch.arange(seq, device=x.device)
                pos = token_positions.unsqueeze(-2)
                q, k = self.rope(q, pos), self.rope(k, pos)
        with record_function("sdpa"):
            mask = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
            out = scaled_dot_product_attention(q, k, v, mask)
        with record_function("o_proj"):
            return self.output_proj(out.transpose(-3, -2).reshape(*lead, seq, d))

