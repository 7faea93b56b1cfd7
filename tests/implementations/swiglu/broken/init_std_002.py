"""Initialises every weight with the GPT-2 habit N(0, 0.02) instead of the variance-scaled truncated normal."""

import torch
from torch import nn

MAY_FAIL = ["init_w1", "init_w2"]


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = nn.Module()
        self.w2 = nn.Module()
        self.w3 = nn.Module()
        for mod, shape in ((self.w1, (d_ff, d_model)), (self.w2, (d_model, d_ff)), (self.w3, (d_ff, d_model))):
            mod.weight = nn.Parameter(torch.randn(shape, device=device, dtype=dtype) * 0.02)

    def forward(self, x):
        gate = x @ self.w1.weight.T
        return (gate * torch.sigmoid(gate) * (x @ self.w3.weight.T)) @ self.w2.weight.T
