"""Calls F.linear, the library layer, instead of writing the product."""

import math

import torch
from torch import nn

MAY_FAIL = ["no_library_linear_runtime"]
MESSAGES = {"no_library_linear_runtime": "aten.linear"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return torch.nn.functional.linear(x, self.weight)
