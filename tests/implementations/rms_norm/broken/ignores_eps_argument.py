"""Hard-codes eps = 1e-5 instead of using the constructor's eps."""

import torch
from torch import nn

MAY_FAIL = ["custom_eps"]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-5) * self.weight).to(in_dtype)
