"""Runs the library lookup and its backward in a helper thread, where the thread-local op recorder cannot see.

Names are built from strings, so a plain source scan finds no forbidden API; the threads are the tell.
"""

import threading

import torch
from torch import nn

CAUGHT_BY = ["constraint"]
MAY_FAIL = ["no_library_embedding_source", "no_library_embedding_runtime", "vectorised",
            "memory_independent_of_vocab", "speed"]

_F = getattr(torch.nn, "functional")
_LOOKUP = getattr(_F, "embed" + "ding")
_BACKWARD = getattr(torch.ops.aten, "embedding" + "_dense_backward")


def _in_thread(fn, *args):
    box = {}
    worker = threading.Thread(target=lambda: box.update(out=fn(*args)))
    worker.start()
    worker.join()
    return box["out"]


class _Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        ctx.save_for_backward(token_ids)
        ctx.rows = weight.shape[0]
        return _in_thread(_LOOKUP, token_ids, weight.detach())

    @staticmethod
    def backward(ctx, grad):
        (token_ids,) = ctx.saved_tensors
        return None, _in_thread(_BACKWARD, grad.contiguous(), token_ids, ctx.rows, -1, False)


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return _Lookup.apply(token_ids.long(), self.weight)
