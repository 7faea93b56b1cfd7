"""Computes everything in float64 (sum of squares divided by d), then casts back to the input dtype."""

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.d_model = d_model
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(d_model, device=device, dtype=dtype))
        nn.init.ones_(self.weight)

    def forward(self, x):
        wide = x.double()
        mean_square = (wide * wide).sum(dim=-1, keepdim=True) / self.d_model
        out = self.weight.double() * (wide / torch.sqrt(mean_square + self.eps))
        return out.to(x.dtype)
