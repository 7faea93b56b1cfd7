"""Backward pops every dispatch mode (the op recorder among them), runs the library's
aten.embedding_dense_backward, and pushes the modes back; the kernel's name is built from strings.

torch's profiler still sees the kernel run outside any op the recorder saw: tampered evidence.
"""

import importlib

import torch

CAUGHT_BY = ["constraint"]
MAY_FAIL = ["no_library_embedding_source", "no_library_embedding_runtime", "memory_independent_of_vocab",
            "vectorised"]

_modes = importlib.import_module("torch.utils." + "_python_dispatch")
_BACKWARD = getattr(torch.ops.aten, "embedding" + "_dense_backward")


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        if ((token_ids < 0) | (token_ids >= weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {weight.shape[0]})")
        ctx.save_for_backward(token_ids)
        ctx.rows = weight.shape[0]
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        (token_ids,) = ctx.saved_tensors
        popped = []
        while _modes._get_current_dispatch_mode() is not None:
            popped.append(_modes._pop_mode())
        try:
            grad_weight = _BACKWARD(grad_output.contiguous(), token_ids, ctx.rows, -1, False)
        finally:
            for mode in reversed(popped):
                _modes._push_mode(mode)
        return None, grad_weight
