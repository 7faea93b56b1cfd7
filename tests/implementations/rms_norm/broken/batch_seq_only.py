"""Handles (batch, seq, d_model) inputs only, as many real students' RMSNorms do (`b, s, d = x.shape`, an einops
pattern 'batch sequence d_model', the shape CS336's handout gives forward): the ordinary checks pass
(batch, seq, d_model) inputs, as the course's tests do, so the one bug costs the two checks that try other
leading shapes and names it there, not every check that draws an input."""

import torch
from torch import nn

MAY_FAIL = ["no_leading_dims", "other_leading_dims"]
MESSAGES = {"no_leading_dims": "not enough values to unpack", "other_leading_dims": "exactly two leading dims"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        b, s, d = x.shape
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype).reshape(b, s, d)
