"""The transformer layers, written the student's way: own class names, argument names and parameter names."""

import math

import torch
from torch import nn


class Dense(nn.Module):
    """A bias-free linear map whose weight is called `W`, built from (d_in, d_out)."""

    def __init__(self, d_in, d_out, device=None, dtype=None):
        super().__init__()
        self.W = nn.Parameter(torch.empty((d_out, d_in), device=device, dtype=dtype))
        sigma = math.sqrt(2.0 / (d_in + d_out))
        nn.init.trunc_normal_(self.W, mean=0.0, std=sigma, a=-3 * sigma, b=3 * sigma)

    def forward(self, x):
        return x @ self.W.T


class RootMeanSquareNorm(nn.Module):
    """RMSNorm whose gain is called `gain`; statistics in float32, output in the input's dtype."""

    def __init__(self, width, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(width, device=device, dtype=dtype))

    def forward(self, x):
        orig = x.dtype
        x32 = x.to(torch.float32) if orig in (torch.float16, torch.bfloat16) else x
        rms = torch.sqrt(x32.square().mean(-1, keepdim=True) + self.eps)
        return (x32 / rms * self.gain).to(orig)


class GatedFFN(nn.Module):
    """SwiGLU with its maps called gate_proj (w1), down_proj (w2) and up_proj (w3)."""

    def __init__(self, width, hidden, device=None, dtype=None):
        super().__init__()
        self.gate_proj = Dense(width, hidden, device=device, dtype=dtype)
        self.down_proj = Dense(hidden, width, device=device, dtype=dtype)
        self.up_proj = Dense(width, hidden, device=device, dtype=dtype)

    def forward(self, x):
        g = self.gate_proj(x)
        return self.down_proj(g * torch.sigmoid(g) * self.up_proj(x))


def stable_softmax(t, axis):
    """Softmax along `axis`, the maximum subtracted first; half precision computed in float32."""
    wide = t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
    e = torch.exp(wide - wide.max(dim=axis, keepdim=True).values)
    return (e / e.sum(dim=axis, keepdim=True)).to(t.dtype)


class Rotary(nn.Module):
    """RoPE over adjacent pairs; the tables are non-persistent buffers."""

    def __init__(self, theta, head_dim, context_length, device=None):
        super().__init__()
        freqs = theta ** (-torch.arange(0, head_dim, 2, device=device, dtype=torch.float64) / head_dim)
        angles = torch.outer(torch.arange(context_length, device=device, dtype=torch.float64), freqs)
        self.register_buffer("cos_cached", angles.cos().to(torch.get_default_dtype()), persistent=False)
        self.register_buffer("sin_cached", angles.sin().to(torch.get_default_dtype()), persistent=False)

    def forward(self, x, positions):
        cos, sin = self.cos_cached[positions], self.sin_cached[positions]
        work = x.to(torch.promote_types(x.dtype, cos.dtype))
        x1, x2 = work[..., 0::2], work[..., 1::2]
        out = torch.empty_like(work)
        out[..., 0::2] = x1 * cos - x2 * sin
        out[..., 1::2] = x1 * sin + x2 * cos
        return out.to(x.dtype)


def attention(q, k, v, mask=None):
    """Scaled dot-product attention; `mask` True where a query may attend."""
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    return stable_softmax(scores, -1) @ v


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with projections wq, wk, wv and wo."""

    def __init__(self, width, n_heads, context_length=None, rope_theta=None, device=None, dtype=None):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, width // n_heads
        self.wq = Dense(width, width, device=device, dtype=dtype)
        self.wk = Dense(width, width, device=device, dtype=dtype)
        self.wv = Dense(width, width, device=device, dtype=dtype)
        self.wo = Dense(width, width, device=device, dtype=dtype)
        self.rotary = Rotary(rope_theta, self.head_dim, context_length, device=device) if rope_theta else None

    def forward(self, x, positions=None):
        *batch, n, width = x.shape
        split = lambda t: t.view(*batch, n, self.n_heads, self.head_dim).transpose(-2, -3)  # noqa: E731
        q, k, v = split(self.wq(x)), split(self.wk(x)), split(self.wv(x))
        if self.rotary is not None:
            pos = torch.arange(n, device=x.device) if positions is None else positions
            q, k = self.rotary(q, pos.unsqueeze(-2)), self.rotary(k, pos.unsqueeze(-2))
        keep = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
        return self.wo(attention(q, k, v, keep).transpose(-2, -3).reshape(*batch, n, width))


class Block(nn.Module):
    """The pre-norm block, built from this package's own sublayers."""

    def __init__(self, width, n_heads, hidden, context_length, rope_theta, device=None, dtype=None):
        super().__init__()
        self.ln1 = RootMeanSquareNorm(width, device=device, dtype=dtype)
        self.attn = CausalSelfAttention(width, n_heads, context_length, rope_theta, device=device, dtype=dtype)
        self.ln2 = RootMeanSquareNorm(width, device=device, dtype=dtype)
        self.ffn = GatedFFN(width, hidden, device=device, dtype=dtype)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))
        return h + self.ffn(self.ln2(h))
