import math

import torch


def silu(x):
    return x * torch.sigmoid(x)


def softmax(x, dim=-1):
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = (wide - wide.max(dim=dim, keepdim=True).values).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
    return torch.einsum("...qk,...kd->...qd", softmax(scores, dim=-1), v)
