"""Passes a=-3, b=3 to trunc_normal_ as if they were in units of std: in effect untruncated."""

import math

import torch
from torch import nn

MAY_FAIL = ["init_distribution"]
MESSAGES = {"init_distribution": "weight"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, 0.0, math.sqrt(2 / (in_features + out_features)), -3.0, 3.0)

    def forward(self, x):
        return x @ self.weight.T
