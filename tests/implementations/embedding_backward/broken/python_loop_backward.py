"""Accumulates the gradient token by token in a Python loop: the op count grows with the number of tokens."""

import torch

MAY_FAIL = ["vectorised"]


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
        grad_weight = torch.zeros(num_embeddings, embedding_dim, dtype=grad_output.dtype, device=grad_output.device)
        flat_ids = token_ids.reshape(-1).tolist()
        flat_grad = grad_output.reshape(-1, embedding_dim)
        for position, token in enumerate(flat_ids):
            grad_weight[token] += flat_grad[position]
        return None, grad_weight
