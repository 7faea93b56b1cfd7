"""Ignores the dtype argument: the weight is always float32."""

import math

import torch
from torch import nn

MAY_FAIL = ["honours_dtype", "default_dtype"]


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=torch.float32))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight.T
