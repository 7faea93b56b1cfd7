"""The tokenizer's module compiles its pattern with `regex` when it is imported."""

import regex
import torch
from torch import nn

PAT = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        rms = torch.sqrt(x.float().square().mean(-1, keepdim=True) + self.eps)
        return (x.float() / rms * self.weight).to(x.dtype)
