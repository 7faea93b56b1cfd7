"""Calls torch.manual_seed(0) in its constructor (a leftover from debugging): the weight is ones anyway, but every
random number the program draws after building a norm (the next layer's weights, dropout) is the same whatever
seed the caller set."""

import torch
from torch import nn

MAY_FAIL = ["leaves_random_stream"]
MESSAGES = {"leaves_random_stream": "reseeds"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        torch.manual_seed(0)
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        in_dtype = x.dtype
        x = x.to(torch.float32)
        return (x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight).to(in_dtype)
