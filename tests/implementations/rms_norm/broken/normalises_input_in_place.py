"""Normalises x in place when no gradient is needed ("saves memory" at inference): x.float() of a float32 x is x
itself, so the caller's tensor (the residual stream of a block) is overwritten. Under autograd it takes the
out-of-place path, so every gradient-enabled check passes."""

import torch
from torch import nn

MAY_FAIL = ["input_unchanged"]
MESSAGES = {"input_unchanged": "in place"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        if torch.is_grad_enabled() and x.requires_grad:
            x = x * inv_rms
        else:
            x.mul_(inv_rms)
        return (x * self.weight).to(in_dtype)
