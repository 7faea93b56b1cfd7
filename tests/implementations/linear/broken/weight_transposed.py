"""Stores the weight as (in_features, out_features) and computes x @ W: right map, wrong layout (a checkpoint will not load)."""

import math

import torch
from torch import nn

MAY_FAIL = ["parameters", "parameter_count", "output_shape", "matches_reference", "no_library_linear_source",
            "square_weight", "homogeneous", "gradients", "forward_keeps_weights", "init_distribution",
            "init_independent", "no_library_linear_runtime",
            # the test weights cannot be loaded, so the self-comparing checks observe nothing and say so
            "calls_in_sequence", "input_unchanged", "input_views",
            # every call with the test weights fails, a vector x included
            "no_leading_dims"]


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features, device=device, dtype=dtype))
        std = math.sqrt(2 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, 0.0, std, -3 * std, 3 * std)

    def forward(self, x):
        return x @ self.weight
