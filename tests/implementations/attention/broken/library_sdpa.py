"""Calls F.scaled_dot_product_attention (same convention: a boolean mask, True = may attend) instead of writing it."""

import torch.nn.functional as F

MAY_FAIL = ["no_library_softmax_source", "no_library_softmax_runtime"]
MESSAGES = {"no_library_softmax_source": "scaled_dot_product_attention"}


def scaled_dot_product_attention(Q, K, V, mask=None):
    return F.scaled_dot_product_attention(Q, K, V, attn_mask=mask)
