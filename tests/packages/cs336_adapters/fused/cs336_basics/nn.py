import math

import torch
from einops import rearrange
from torch import nn

from cs336_basics.functional import attention, silu


def _trunc(shape, std, device, dtype):
    return nn.init.trunc_normal_(torch.empty(shape, device=device, dtype=dtype), std=std, a=-3 * std, b=3 * std)


class Linear(nn.Module):
    def __init__(self, d_in, d_out, *, device=None, dtype=None, weight=None):
        super().__init__()
        std = math.sqrt(2 / (d_in + d_out))
        self.weight = nn.Parameter(weight if weight is not None else _trunc((d_out, d_in), std, device, dtype))

    def forward(self, x):
        return torch.einsum("...i,oi->...o", x, self.weight)


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, *, device=None, dtype=None, weight=None):
        super().__init__()
        self.weight = nn.Parameter(weight if weight is not None else
                                   _trunc((num_embeddings, embedding_dim), 1.0, device, dtype))

    def forward(self, ids):
        return self.weight[ids]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, *, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        out = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps) * self.scale
        return out.to(x.dtype)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, *, device=None, dtype=None, weights=None):
        super().__init__()
        weights = weights or {}
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype, weight=weights.get("w1"))
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype, weight=weights.get("w2"))
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype, weight=weights.get("w3"))

    def forward(self, x):
        return self.w2(silu(self.w1(x)) * self.w3(x))


class RoPE(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        inv = 1.0 / theta ** (torch.arange(0, d_k, 2, device=device).float() / d_k)
        ang = torch.outer(torch.arange(max_seq_len, device=device).float(), inv)
        self.register_buffer("cos_cached", ang.cos(), persistent=False)
        self.register_buffer("sin_cached", ang.sin(), persistent=False)

    def forward(self, x, token_positions):
        cos = self.cos_cached[token_positions].to(x.dtype)
        sin = self.sin_cached[token_positions].to(x.dtype)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return rearrange(torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1), "... d two -> ... (d two)")


class CausalSelfAttention(nn.Module):
    """One fused (3 d_model, d_model) projection for queries, keys and values; RoPE passed in."""

    def __init__(self, d_model, num_heads, *, rope=None, device=None, dtype=None):
        super().__init__()
        self.num_heads = num_heads
        self.rope = rope
        std = math.sqrt(2 / (4 * d_model))
        self.qkv = nn.Parameter(_trunc((3 * d_model, d_model), std, device, dtype))
        self.out = Linear(d_model, d_model, device=device, dtype=dtype)

    def forward(self, x, token_positions=None):
        n = x.shape[-2]
        q, k, v = torch.einsum("...si,oi->...so", x, self.qkv).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "... s (h d) -> ... h s d", h=self.num_heads) for t in (q, k, v))
        if self.rope is not None:
            pos = token_positions if token_positions is not None else torch.arange(n, device=x.device)
            pos = pos.unsqueeze(-2)  # the same positions for every head
            q, k = self.rope(q, pos), self.rope(k, pos)
        mask = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        return self.out(rearrange(attention(q, k, v, mask), "... h s d -> ... s (h d)"))


class Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, *, rope, device=None, dtype=None):
        super().__init__()
        self.norm1 = RMSNorm(d_model, device=device, dtype=dtype)
        self.attention = CausalSelfAttention(d_model, num_heads, rope=rope, device=device, dtype=dtype)
        self.norm2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.mlp = SwiGLU(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        h = x + self.attention(self.norm1(x))
        return h + self.mlp(self.norm2(h))
