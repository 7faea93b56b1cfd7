"""Creates the gradient with `torch.zeros(V, D)` (default dtype, default device): float64 gradients fail with a dtype mismatch in index_add_."""

import torch

BREAKS_EVERY_CALL_ON_A_DEVICE = True  # a tensor left on the CPU: on a GPU the first call fails
MAY_FAIL = ["boundary_rows", "gradcheck", "repeated_ids_accumulate", "untouched_rows_zero", "weight_gradient"]


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        if ((token_ids < 0) | (token_ids >= weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {weight.shape[0]})")
        ctx.save_for_backward(token_ids)
        ctx.weight_shape = weight.shape
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        (token_ids,) = ctx.saved_tensors
        num_embeddings, embedding_dim = ctx.weight_shape
        grad_weight = torch.zeros(num_embeddings, embedding_dim)
        grad_weight.index_add_(0, token_ids.reshape(-1), grad_output.reshape(-1, embedding_dim))
        return None, grad_weight
