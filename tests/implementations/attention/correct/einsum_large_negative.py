"""einsum for both products, a large negative number added at masked scores, softmax inline."""

import math

import torch


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", Q, K) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores + torch.where(mask, 0.0, -1e9).to(scores.dtype)
    scores = scores - scores.max(dim=-1, keepdim=True).values
    weights = scores.exp()
    weights = weights / weights.sum(dim=-1, keepdim=True)
    return torch.einsum("...qk,...kd->...qd", weights, V)
