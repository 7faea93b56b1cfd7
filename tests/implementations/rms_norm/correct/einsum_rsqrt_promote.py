"""The mean square as an einsum, upcast only where needed (float64 stays float64)."""

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.d_model = d_model
        self.weight = nn.Parameter(torch.ones((d_model,), device=device, dtype=dtype))

    def forward(self, x):
        compute = torch.promote_types(x.dtype, torch.float32)
        h = x.to(compute)
        ms = torch.einsum("...d,...d->...", h, h).unsqueeze(-1) / self.d_model
        y = h * torch.rsqrt(ms + self.eps)
        return (y * self.weight.to(compute)).type(x.dtype)
