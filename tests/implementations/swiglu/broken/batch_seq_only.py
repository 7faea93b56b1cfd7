"""Its Linear is an einsum written for (batch, seq, d) alone ('bsi,oi->bso'), as real students' layers often are:
the ordinary checks pass (batch, seq, d_model), as the course's tests do, so the one restriction costs the two
checks that try other leading shapes, not every check that draws an input."""


import math

import torch
from torch import nn

MAY_FAIL = ["output_shape", "no_leading_dims"]
MESSAGES = {"output_shape": "exactly two leading dims"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return torch.einsum("bsi,oi->bso", x, self.weight)


def silu(z):
    return z * torch.sigmoid(z)


class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff, device=None, dtype=None):
        super().__init__()
        self.w1 = Linear(d_model, d_ff, device, dtype)
        self.w2 = Linear(d_ff, d_model, device, dtype)
        self.w3 = Linear(d_model, d_ff, device, dtype)

    def forward(self, x):
        return self.w2(silu(self.w1(x)) * self.w3(x))
