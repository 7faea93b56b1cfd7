"""Softmax as exp(s - logsumexp(s)); masked weights zeroed with where."""

import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    s = Q @ K.mT / math.sqrt(K.shape[-1])
    if mask is not None:
        s = torch.where(mask, s, torch.tensor(float("-inf"), dtype=s.dtype, device=s.device))
    p = torch.exp(s - torch.logsumexp(s, dim=-1, keepdim=True))
    return p @ V
