"""Its Linear calls torch.manual_seed(0) before initialising, so w1 and w3 start identical (and w2 is w1's draws in
another shape): each weight alone has the contract's distribution, so every init check passes."""

import math

import torch
from torch import nn

MAY_FAIL = ["independent_weights"]
MESSAGES = {"independent_weights": "reseeds"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        torch.manual_seed(0)
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight.T


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        z = self.w1(x)
        return self.w2(z * torch.sigmoid(z) * self.w3(x))
