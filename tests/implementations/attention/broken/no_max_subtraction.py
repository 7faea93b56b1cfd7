"""A softmax without the max subtraction: exp overflows to inf for scores of size ~1000 (NaN out)."""

MAY_FAIL = ["large_scores"]

import math

import torch


def softmax(x, dim):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V

