"""Keeps a contiguous copy of weight.T made at the first call: after an optimiser step (or load_state_dict) the layer
still multiplies by the old weight. A fresh layer called once, as every other check does, is right."""

import math

import torch
from torch import nn

MAY_FAIL = ["calls_in_sequence"]
MESSAGES = {"calls_in_sequence": "changed in place"}


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        std = math.sqrt(2.0 / (in_features + out_features))
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)
        self._weight_t = None

    def forward(self, x):
        if self._weight_t is None:
            self._weight_t = self.weight.T.contiguous()  # "faster": transposed once
        return x @ self._weight_t
