"""Flattens the leading axes, multiplies 2-D, restores the shape."""

import math

import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(nn.init.trunc_normal_(
            torch.empty(out_features, in_features, device=device, dtype=dtype), std=std, a=-3 * std, b=3 * std))

    def forward(self, x):
        flat = x.reshape(-1, self.in_features)
        return torch.matmul(flat, self.weight.transpose(0, 1)).reshape(*x.shape[:-1], self.out_features)
