"""Normalises over the first axis instead of the last (the model axis)."""

import torch
from torch import nn

MAY_FAIL = ["matches_reference", "no_library_norm_source", "eps_inside_sqrt", "custom_eps",
            "scale_invariance", "bf16_accuracy", "fp16_accuracy", "fp16_large_inputs", "gradients"]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.float()
        return (x * torch.rsqrt(x.pow(2).mean(dim=0, keepdim=True) + self.eps) * self.weight).to(in_dtype)
