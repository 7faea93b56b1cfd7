"""LLaMA's formulation: a _norm helper on x.float(), cast back with type_as(x) (a no-op for float32 inputs,
which torch runs without the op recorder ever seeing an op: that is not tampering)."""

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        return (self._norm(x.float()) * self.weight).type_as(x)
