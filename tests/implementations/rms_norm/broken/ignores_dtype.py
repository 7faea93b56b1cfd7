"""Ignores the `dtype` argument: the gain is always created in float32."""

import torch
from torch import nn

MAY_FAIL = ["honours_dtype", "default_dtype"]
MESSAGES = {"honours_dtype": "`weight` is float32"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=torch.float32))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight).to(in_dtype)
