"""eps kept as a 0-dim float32 tensor attribute (seen in a real CS336 repository): type promotion lets
the input's dtype win over a 0-dim tensor, so it never changes the dtype the layer computes in."""

import torch
from torch import nn


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = torch.tensor(eps, device=device, dtype=torch.float32)
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.promote_types(in_dtype, torch.float32))
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype)
