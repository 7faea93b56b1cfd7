"""exp(x) / sum(exp(x)) without subtracting the maximum: overflows to inf/NaN for large inputs."""

import torch

MAY_FAIL = ["large_inputs_stable"]
MESSAGES = {"large_inputs_stable": "overflowed to inf"}


def softmax(x, dim):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    e = torch.exp(wide)
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
