"""Computes x @ W instead of x @ W.T: fails outright unless in_features == out_features, and is wrong then."""

import math

import torch
from torch import nn

MAY_FAIL = ["output_shape", "matches_reference", "no_library_linear_source", "square_weight", "homogeneous",
            "gradients", "forward_keeps_weights", "honours_dtype", "default_dtype", "no_library_linear_runtime",
            # every call fails, so the self-comparing checks observe nothing and report that error
            "input_views", "input_unchanged", "calls_in_sequence", "no_leading_dims"]


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight
