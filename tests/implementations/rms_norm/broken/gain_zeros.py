"""Initialises the gain to zeros: the layer starts by outputting zeros (and gets no gradient through x)."""

import torch
from torch import nn

MAY_FAIL = ["gain_starts_at_one"]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight).to(in_dtype)
