"""Fills the masked scores with -1e4 instead of -inf: exp(-1e4 - max) is 0 at ordinary scores, so every check with
scores of ordinary size passes; once every score a query may see is below -1e4, the masked keys take the weight."""

MAY_FAIL = ["masked_keys_at_large_scores"]
MESSAGES = {"masked_keys_at_large_scores": "finite fill"}

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e4)
    return softmax(scores, dim=-1) @ V
