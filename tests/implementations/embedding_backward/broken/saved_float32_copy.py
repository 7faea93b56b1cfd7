"""Saves `weight.detach().float()` and builds the gradient from it: float64 gradients are silently rounded to float32.

gradcheck does NOT catch this (the lookup's Jacobian is 0/1, exact in float32, and
gradcheck's tolerances are loose). A float64 gradient comparison with a random
upstream gradient does: relative error ~1e-7 for distinct IDs, up to ~1e-5 when
repeated IDs are summed in float32, so use repeated IDs and float64 tolerances.
"""

import torch

MAY_FAIL = ["weight_gradient", "repeated_ids_accumulate", "boundary_rows"]


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        if ((token_ids < 0) | (token_ids >= weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {weight.shape[0]})")
        ctx.save_for_backward(token_ids, weight.detach().float())
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        token_ids, weight = ctx.saved_tensors
        embedding_dim = weight.shape[1]
        grad_weight = torch.zeros_like(weight)
        grad_weight.index_add_(0, token_ids.reshape(-1), grad_output.reshape(-1, embedding_dim).float())
        return None, grad_weight
