"""Backward builds a sparse COO gradient (one entry per token) and densifies it; coalescing sums the repeated IDs."""

import torch


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        V = weight.shape[0]
        if ((token_ids < 0) | (token_ids >= V)).any():
            raise IndexError(f"token ids must be in [0, {V})")
        ctx.save_for_backward(token_ids)
        ctx.V = V
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        (token_ids,) = ctx.saved_tensors
        D = grad_output.shape[-1]
        indices = token_ids.reshape(1, -1).long()
        values = grad_output.reshape(-1, D)
        grad_weight = torch.sparse_coo_tensor(indices, values, (ctx.V, D), check_invariants=True).to_dense()
        return None, grad_weight
