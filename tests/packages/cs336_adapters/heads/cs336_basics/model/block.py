import torch
import torch.nn as nn

from cs336_basics.model.attention import MultiHead
from cs336_basics.model.basic import Linear, gelu_free_silu


class Norm(nn.Module):
    """RMSNorm computed in float32 for every input, as the handout suggests."""

    def __init__(self, d, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(d, device=device, dtype=dtype))

    def forward(self, x):
        dtype = x.dtype
        x32 = x.to(torch.float32) if dtype != torch.float64 else x
        ms = x32.pow(2).mean(dim=-1, keepdim=True)
        return (x32 * torch.rsqrt(ms + self.eps) * self.gain).to(dtype)


class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device=device, dtype=dtype)
        self.w2 = Linear(d_ff, d_model, device=device, dtype=dtype)
        self.w3 = Linear(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        return self.w2.forward(gelu_free_silu(self.w1.forward(x)) * self.w3.forward(x))


class Block(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, *, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.ln1 = Norm(d_model, device=device, dtype=dtype)
        self.attn = MultiHead(d_model, num_heads, use_rope=True, max_seq_len=max_seq_len, theta=theta,
                              device=device, dtype=dtype)
        self.ln2 = Norm(d_model, device=device, dtype=dtype)
        self.ffn = FeedForward(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.ffn(self.ln2(x))
