"""Stores w2 as (d_ff, d_model), like w1 and w3, and multiplies by it untransposed."""

import math

import torch
from torch import nn

MAY_FAIL = ["parameters", "output_shape", "matches_reference", "negative_gate_inputs", "gradients", "forward_keeps_weights",
            "no_library_silu_source", "no_library_silu_runtime", "init_w1", "init_w2", "honours_dtype"]


def _init(shape, device, dtype):
    std = math.sqrt(2 / sum(shape))
    return nn.Parameter(nn.init.trunc_normal_(torch.empty(shape, device=device, dtype=dtype), 0, std, -3 * std, 3 * std))


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = _init((d_ff, d_model), device, dtype)
        self.w2 = _init((d_ff, d_model), device, dtype)
        self.w3 = _init((d_ff, d_model), device, dtype)

    def forward(self, x):
        gate = x @ self.w1.T
        return (gate * torch.sigmoid(gate) * (x @ self.w3.T)) @ self.w2
