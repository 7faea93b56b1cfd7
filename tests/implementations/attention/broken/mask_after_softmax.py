"""Zeroes the masked weights after the softmax: the remaining weights no longer sum to one."""

MAY_FAIL = ["matches_reference", "mask_broadcast", "causal_mask", "gradient", "no_library_softmax_source", "causal", "other_leading_dims"]

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    weights = softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights @ V

