"""Forgets the 1/sqrt(d_k) scale."""

MAY_FAIL = ["matches_reference", "mask_broadcast", "causal_mask", "gradient", "no_library_softmax_source", "no_mask", "large_scores", "other_leading_dims"]

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V

