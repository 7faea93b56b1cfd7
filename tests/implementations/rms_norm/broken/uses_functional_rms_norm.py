"""Calls the library's F.rms_norm."""

import torch
from torch import nn

MAY_FAIL = ["no_library_norm_source", "no_library_norm_runtime"]


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        out = torch.nn.functional.rms_norm(x.float(), (x.shape[-1],), self.weight.float(), self.eps)
        return out.to(torch.promote_types(torch.float32, self.weight.dtype)).to(in_dtype)
