"""Honours dtype= but not the default dtype: the weight is float32 unless dtype= says otherwise."""

import math

import torch
from torch import nn

MAY_FAIL = ["default_dtype"]
MESSAGES = {"default_dtype": "`weight` is float32"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device,
                                               dtype=dtype if dtype is not None else torch.float32))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        return x @ self.weight.T
