import math

import torch
import torch.nn as nn


class Linear(nn.Module):
    def __init__(self, fan_in: int, fan_out: int, device=None, dtype=None):
        super().__init__()
        sigma = (2.0 / (fan_in + fan_out)) ** 0.5
        self.weight = nn.Parameter(torch.empty(fan_out, fan_in, device=device, dtype=dtype))
        torch.nn.init.trunc_normal_(self.weight, 0.0, sigma, -3 * sigma, 3 * sigma)

    def forward(self, x):
        return x @ self.weight.transpose(-1, -2)


class TokenEmbedding(nn.Module):
    def __init__(self, vocab: int, dim: int, device=None, dtype=None):
        super().__init__()
        self.E = nn.Parameter(torch.nn.init.trunc_normal_(torch.empty(vocab, dim, device=device, dtype=dtype),
                                                         0.0, 1.0, -3.0, 3.0))

    def forward(self, ids):
        flat = torch.index_select(self.E, 0, ids.reshape(-1))
        return flat.reshape(*ids.shape, self.E.shape[-1])


def gelu_free_silu(x):
    return x / (1 + torch.exp(-x))


def stable_softmax(x, dim):
    hi = x.dtype in (torch.float16, torch.bfloat16)
    z = (x.float() if hi else x)
    z = z - z.max(dim=dim, keepdim=True)[0]
    p = torch.exp(z)
    return (p / p.sum(dim, keepdim=True)).to(x.dtype)
