"""Flattens the leading dims with x.view(-1, in_features): right for a contiguous x, a RuntimeError for a transposed
or sliced activation (x.reshape copies only when it must)."""

import math

import torch
from torch import nn

MAY_FAIL = ["input_views"]
MESSAGES = {"input_views": "view"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        flat = x.view(-1, x.shape[-1])
        return (flat @ self.weight.T).view(*x.shape[:-1], self.weight.shape[0])
