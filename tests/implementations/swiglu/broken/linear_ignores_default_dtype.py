"""Its Linear honours `dtype=` but not the default dtype (`dtype or torch.float32`): without dtype= the
weights are float32 whatever torch.get_default_dtype() says. Only the default-dtype check may see it: every
other check builds the layer in the dtype it is about."""

import math

import torch
from torch import nn

MAY_FAIL = ["default_dtype"]
MESSAGES = {"default_dtype": "`w1.weight` is float32"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device,
                                               dtype=dtype or torch.float32))
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
        gate = self.w1(x)
        return self.w2(gate * torch.sigmoid(gate) * self.w3(x))
