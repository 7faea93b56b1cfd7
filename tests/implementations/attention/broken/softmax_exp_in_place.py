"""Exponentiates the scores in place (scores.exp_(), then weights /= their sum), as a real student's softmax does:
forward is right, but exp's backward needs the output exp_ overwrote, so backward raises. The gradient check names
it; the checks that trace forward and backward to see how the layer computes judge its forward alone."""

import math

import torch

MAY_FAIL = ["gradient"]
MESSAGES = {"gradient": "inplace operation"}


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    scores = scores - scores.amax(dim=-1, keepdim=True)
    weights = scores.exp_()
    weights /= weights.sum(dim=-1, keepdim=True)
    return weights @ V
