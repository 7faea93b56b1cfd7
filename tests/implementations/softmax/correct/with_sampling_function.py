"""A correct softmax in a module that also holds decoding code: sample() and a Sampler call torch.softmax.

The source checks judge the code softmax runs; the library calls beside it are advice, never a lost point.
"""

import torch
import torch.nn.functional as F


def softmax(x, dim):
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = torch.exp(wide - wide.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def sample(logits, temperature=1.0, generator=None):
    """Draw the next token (decoding, not the layer): the library softmax is fine here."""
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator)


class Sampler:
    def __init__(self, top_k=50):
        self.top_k = top_k

    def __call__(self, logits):
        values, indices = logits.topk(self.top_k, dim=-1)
        return indices.gather(-1, torch.multinomial(F.softmax(values, dim=-1), 1))
