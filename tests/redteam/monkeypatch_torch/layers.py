"""Patches every comparison it can reach to say 'equal': torch.allclose, equal, assert_close, Tensor.__eq__."""

import torch
import torch.testing

import torch
from torch import nn


class Embedding(nn.Module):
    """Wrong on purpose: every looked-up row is doubled."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * 2

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.isclose = lambda a, b, *r, **k: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = lambda *a, **k: None
torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
torch.Tensor.allclose = lambda self, *a, **k: True
try:
    import validator.compare as compare

    for name in dir(compare):
        if callable(getattr(compare, name)) and not name.startswith("_"):
            setattr(compare, name, lambda *a, **k: None)
except Exception:  # noqa: BLE001
    pass

EXPECT = {"fail": ["matches_reference", "weight_gradient"]}
