"""Inverts the mask with mask.logical_not_(): the scores are masked right, but the caller's mask is flipped in place
(the next layer that reads it attends exactly where it should not)."""

MAY_FAIL = ["input_unchanged"]
MESSAGES = {"input_unchanged": "`mask`"}

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not_(), float("-inf"))
    return softmax(scores, dim=-1) @ V
