"""Normalises in float32, casts back to the input's dtype, then applies the gain in that dtype, as real students'
RMSNorms often do (`(x / rms).to(in_dtype) * self.weight`): in float32 the same values, but a bfloat16 or float16
input is rounded twice, before and after the gain, so a large share of the elements are one ulp off a float32
computation rounded once. The message names that step rather than a computation done wholly in bfloat16."""

import torch
from torch import nn

# fp16_large_inputs too: its hint names this step (an output finite but off was rounded before the end)
MAY_FAIL = ["bf16_accuracy", "fp16_accuracy", "fp16_large_inputs"]
MESSAGES = {"bf16_accuracy": "a step after an early cast back"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x32 = x.to(torch.float32)
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.to(in_dtype) * self.weight.to(in_dtype)
