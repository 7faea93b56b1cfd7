"""A correct attention whose module also holds a generation loop that uses F.softmax on the logits.

generate() is no part of the graded entry: its library softmax is advice, not a lost point.
"""

import math

import torch
from torch.nn import functional as F


def softmax(x, dim):
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(Q, K, V, mask=None):
    scores = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return softmax(scores, dim=-1) @ V


@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0):
    tokens = prompt
    for _ in range(max_new_tokens):
        logits = model(tokens)[:, -1, :] / temperature
        next_token = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
        tokens = torch.cat([tokens, next_token], dim=1)
    return tokens
