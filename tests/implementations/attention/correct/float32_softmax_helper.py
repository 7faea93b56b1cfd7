"""Its softmax helper computes in float32 for every input and casts back (the softmax contract allows it), so
float64 Q, K, V give float64 attention with float32-precision weights."""

import math

import torch


def softmax(x, dim):
    in_dtype = x.dtype
    x = x.to(torch.float32)
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(in_dtype)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V
