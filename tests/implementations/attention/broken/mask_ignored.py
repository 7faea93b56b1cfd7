"""Accepts the mask and never applies it."""

MAY_FAIL = ["matches_reference", "mask_broadcast", "causal_mask", "gradient", "no_library_softmax_source", "causal", "other_leading_dims"]
MESSAGES = {"causal": "changed the output at position"}

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        pass
    return softmax(scores, dim=-1) @ V

