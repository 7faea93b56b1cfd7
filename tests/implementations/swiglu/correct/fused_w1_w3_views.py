"""Registers w1, w3 and w2 in another order and applies the gate via sigmoid on a matmul with transposes."""

import math

import torch
from torch import nn


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2 / (d_model + d_ff))
        kw = dict(device=device, dtype=dtype)
        self.w3 = nn.Module()
        self.w3.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(d_ff, d_model, **kw), 0, std, -3 * std, 3 * std))
        self.w1 = nn.Module()
        self.w1.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(d_ff, d_model, **kw), 0, std, -3 * std, 3 * std))
        self.w2 = nn.Module()
        self.w2.weight = nn.Parameter(nn.init.trunc_normal_(torch.empty(d_model, d_ff, **kw), 0, std, -3 * std, 3 * std))

    def forward(self, x):
        a = torch.matmul(x, self.w1.weight.transpose(-1, -2))
        b = torch.matmul(x, self.w3.weight.transpose(-1, -2))
        return torch.matmul(torch.sigmoid(a) * a * b, self.w2.weight.transpose(-1, -2))
