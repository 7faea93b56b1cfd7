"""Computes attention with a Python loop over the batch elements and the queries: right values, but one small
product per (batch element, query), hundreds of times slower on real sizes."""

MAY_FAIL = ["vectorised"]
MESSAGES = {"vectorised": "Python loop"}

import math

import torch


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def _one(q, K, V, allowed):
    scores = K @ q / math.sqrt(q.shape[-1])
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    return softmax(scores, dim=-1) @ V


def scaled_dot_product_attention(Q, K, V, mask=None):
    lead = torch.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2],
                                  mask.shape[:-2] if mask is not None else ())
    flat = [t.expand(*lead, *t.shape[-2:]).reshape(-1, *t.shape[-2:]) if t is not None else None
            for t in (Q, K, V, mask)]
    Qf, Kf, Vf, Mf = flat
    out = torch.stack([
        torch.stack([_one(Qf[b, i], Kf[b], Vf[b], Mf[b, i] if Mf is not None else None) for i in range(Qf.shape[1])])
        for b in range(Qf.shape[0])])
    return out.reshape(*lead, Q.shape[-2], V.shape[-1])
