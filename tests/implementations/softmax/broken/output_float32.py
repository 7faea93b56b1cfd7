"""Computes in float32 and forgets to cast back: bf16 in, float32 out (and float64 in, float32 out)."""

import torch

MAY_FAIL = ["bf16_keeps_dtype", "float64_keeps_dtype"]
MESSAGES = {"bf16_keeps_dtype": "the output is float32, expected bfloat16"}


def softmax(x, dim):
    wide = x.float()
    e = torch.exp(wide - wide.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)
