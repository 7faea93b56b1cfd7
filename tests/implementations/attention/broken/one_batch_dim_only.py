"""Written for (batch, queries, d_k) alone, with K.transpose(1, 2), as real students' first attention often is: right
for the ordinary checks' (batch, queries, d_k), which the course's first test passes too; with two leading dims the
transpose swaps the heads and the keys, so it multiplies the wrong axes. Only other_leading_dims tries that shape
(no_leading_dims may go too: with none, transpose(1, 2) swaps the keys and d_k)."""

import math

import torch

MAY_FAIL = ["other_leading_dims", "no_leading_dims"]
MESSAGES = {"other_leading_dims": "K.transpose(-2, -1)"}


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(1, 2) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V
