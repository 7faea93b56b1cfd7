"""Three plain parameters named w1, w2, w3 instead of w1.weight, ...: the math is right (einsum, silu as
z / (1 + exp(-z))) and w1/w3, which share a shape, are still told apart by name, so only the names cost."""

import math

import torch
from torch import nn

MAY_FAIL = ["parameters"]
MESSAGES = {"parameters": "expected a parameter named `w1.weight`, found `w1`"}


def _weight(rows, cols, device, dtype):
    w = torch.empty(rows, cols, device=device, dtype=dtype)
    std = math.sqrt(2.0 / (rows + cols))
    return nn.Parameter(nn.init.trunc_normal_(w, std=std, a=-3 * std, b=3 * std))


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = _weight(d_ff, d_model, device, dtype)
        self.w2 = _weight(d_model, d_ff, device, dtype)
        self.w3 = _weight(d_ff, d_model, device, dtype)

    def forward(self, x):
        gate = torch.einsum("...d,fd->...f", x, self.w1)
        up = torch.einsum("...d,fd->...f", x, self.w3)
        hidden = gate / (1 + torch.exp(-gate)) * up
        return torch.einsum("...f,df->...d", hidden, self.w2)
