"""einsum over named axes, factory kwargs passed through, std from the variance."""

import torch
from torch import nn


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        std = (2.0 / (in_features + out_features)) ** 0.5
        w = torch.empty((out_features, in_features), **factory)
        torch.nn.init.trunc_normal_(w, mean=0.0, std=std, a=-3.0 * std, b=3.0 * std)
        self.weight = nn.Parameter(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("...i,oi->...o", x, self.weight)
