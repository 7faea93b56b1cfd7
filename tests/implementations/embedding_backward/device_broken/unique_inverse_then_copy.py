"""Backward sums per distinct ID first (`torch.unique(return_inverse=True)` + `index_add_` into a compact buffer), then writes those rows into the zero matrix; negative IDs wrap in forward (advisory only)."""

# On a GPU this breaks the contract: CUDA indexing has no IndexError for IDs >= num_embeddings,
# only a device-side assert that leaves the device unusable, so the range must be checked explicitly.
# Full marks on the CPU; caught by id_too_large_raises with --device cuda.

MAY_FAIL = ["id_too_large_raises"]  # on a GPU; full marks on the CPU

import torch


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        ctx.save_for_backward(token_ids)
        ctx.num_embeddings = weight.shape[0]
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        (token_ids,) = ctx.saved_tensors
        dim = grad_output.shape[-1]
        flat_grad = grad_output.reshape(-1, dim)
        unique_ids, inverse = torch.unique(token_ids.reshape(-1), return_inverse=True)
        per_id = flat_grad.new_zeros(unique_ids.numel(), dim).index_add_(0, inverse, flat_grad)
        grad_weight = flat_grad.new_zeros(ctx.num_embeddings, dim)
        grad_weight[unique_ids.long()] = per_id
        return None, grad_weight
