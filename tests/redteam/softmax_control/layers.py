"""Control for the attacks graded on the softmax challenge: a correct softmax; its code checks must all pass."""

import torch


def softmax(x, dim):
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = torch.exp(wide - wide.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)

EXPECT = {"control": True, "challenge": "softmax"}
