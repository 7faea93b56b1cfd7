"""An einsum over named axes written for (batch, seq, in_features) alone, as real students' layers often are
('bsi,oi->bso', the shape CS336's handout gives forward): the ordinary checks pass (batch, seq, in_features), as
the course's tests do, so the one restriction costs the two checks that try other leading shapes, not every
check that draws an input."""

import torch
from torch import nn

MAY_FAIL = ["output_shape", "no_leading_dims"]
MESSAGES = {"output_shape": "exactly two leading dims"}


class Linear(nn.Module):
    def __init__(self, in_features: int, out_features: int, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        std = (2.0 / (in_features + out_features)) ** 0.5
        w = torch.empty((out_features, in_features), **factory)
        torch.nn.init.trunc_normal_(w, mean=0.0, std=std, a=-3.0 * std, b=3.0 * std)
        self.weight = nn.Parameter(w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.einsum("bsi,oi->bso", x, self.weight)
