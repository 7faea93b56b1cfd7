"""Upcasts to float32 but never casts back: a bf16 input gives a float32 output (a float64 weight: float64)."""

import torch
from torch import nn

MAY_FAIL = ["honours_dtype", "default_dtype", "bf16_keeps_dtype", "fp16_keeps_dtype"]
MESSAGES = {"bf16_keeps_dtype": "the output is float32, expected bfloat16"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        x32 = x.to(torch.float32)
        return x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight
