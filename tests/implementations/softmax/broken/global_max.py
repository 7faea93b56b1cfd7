"""Subtracts the maximum of the whole tensor: exact in real arithmetic, but slices far below it underflow to 0/0."""

import torch

MAY_FAIL = ["large_inputs_stable"]
MESSAGES = {"large_inputs_stable": "NaN"}


def softmax(x, dim):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    e = torch.exp(wide - wide.max())
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
