import math

import torch
import torch.nn as nn
from einops import rearrange

from cs336_basics.model.basic import Linear, stable_softmax


class Attention(nn.Module):
    """Scaled dot-product attention as a module without parameters."""

    def forward(self, q, k, v, mask=None):
        s = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(q.size(-1)))
        if mask is not None:
            s = s.masked_fill(mask.logical_not(), -math.inf)
        return stable_softmax(s, -1) @ v


class Rotary(nn.Module):
    def __init__(self, theta, d_k, max_seq_len, device=None):
        super().__init__()
        i = torch.arange(d_k // 2, device=device, dtype=torch.float32)
        angles = torch.arange(max_seq_len, device=device, dtype=torch.float32)[:, None] / theta ** (2 * i / d_k)
        self.register_buffer("c", torch.cos(angles), persistent=False)
        self.register_buffer("s", torch.sin(angles), persistent=False)

    def forward(self, x, token_positions):
        c, s = self.c[token_positions], self.s[token_positions]
        pairs = rearrange(x, "... (d two) -> ... d two", two=2)
        a, b = pairs[..., 0], pairs[..., 1]
        out = torch.stack((a * c - b * s, a * s + b * c), -1)
        return rearrange(out, "... d two -> ... (d two)").to(x.dtype)


class Head(nn.Module):
    def __init__(self, d_model, d_head, device=None, dtype=None):
        super().__init__()
        self.q = Linear(d_model, d_head, device=device, dtype=dtype)
        self.k = Linear(d_model, d_head, device=device, dtype=dtype)
        self.v = Linear(d_model, d_head, device=device, dtype=dtype)


class MultiHead(nn.Module):
    def __init__(self, d_model, num_heads, *, use_rope=False, max_seq_len=None, theta=None, device=None, dtype=None):
        super().__init__()
        d_head = d_model // num_heads
        self.heads = nn.ModuleList(Head(d_model, d_head, device=device, dtype=dtype) for _ in range(num_heads))
        self.o = Linear(d_model, d_model, device=device, dtype=dtype)
        self.attend = Attention()
        self.rotary = Rotary(theta, d_head, max_seq_len, device=device) if use_rope else None

    def forward(self, x, token_positions=None):
        n = x.shape[-2]
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        if self.rotary is not None and token_positions is None:
            token_positions = torch.arange(n, device=x.device)
        outs = []
        for head in self.heads:
            q, k, v = head.q(x), head.k(x), head.v(x)
            if self.rotary is not None:
                q, k = self.rotary(q, token_positions), self.rotary(k, token_positions)
            outs.append(self.attend(q, k, v, mask))
        return self.o(torch.cat(outs, dim=-1))
