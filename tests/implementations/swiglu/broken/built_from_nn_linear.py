"""Builds w1, w2 and w3 from nn.Linear (bias=False, re-initialised as the contract says): the values, parameters and
initialisation are right, but the library layer does the work the linear challenge asks students to write."""

import math

import torch
from torch import nn

MAY_FAIL = ["no_library_linear_runtime"]
MESSAGES = {"no_library_linear_runtime": "aten.linear"}


def projection(d_in, d_out, device=None, dtype=None):
    layer = nn.Linear(d_in, d_out, bias=False, device=device, dtype=dtype)
    std = math.sqrt(2 / (d_in + d_out))
    nn.init.trunc_normal_(layer.weight, 0.0, std, -3 * std, 3 * std)
    return layer


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = projection(d_model, d_ff, device, dtype)
        self.w2 = projection(d_ff, d_model, device, dtype)
        self.w3 = projection(d_model, d_ff, device, dtype)

    def forward(self, x):
        z = self.w1(x)
        return self.w2(z * torch.sigmoid(z) * self.w3(x))
