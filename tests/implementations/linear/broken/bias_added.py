"""Adds a zero-initialised bias, like nn.Linear's default: an extra parameter the contract does not have."""

import math

import torch
from torch import nn

MAY_FAIL = ["parameters", "parameter_count"]
MESSAGES = {"parameters": "unexpected extra parameters: bias"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(out_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight.T + self.bias
