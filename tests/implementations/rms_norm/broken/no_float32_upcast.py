"""Computes the statistics in the input's dtype (bf16/fp16) and casts the result back: no float32 upcast."""

import torch
from torch import nn

MAY_FAIL = ["bf16_accuracy", "fp16_accuracy", "fp16_large_inputs"]
MESSAGES = {"bf16_accuracy": "evaluated on the same bfloat16 inputs", "fp16_large_inputs": "scaled by 300"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)
