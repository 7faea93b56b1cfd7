"""Backward calls the library's bag backward kernel, aten._embedding_bag_dense_backward (one ID per bag),
which the old forbidden list did not name; the `aten.*embedding*` family covers it."""

import torch

CAUGHT_BY = ["constraint"]
MAY_FAIL = ["no_library_embedding_source", "no_library_embedding_runtime"]


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        if ((token_ids < 0) | (token_ids >= weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {weight.shape[0]})")
        ctx.save_for_backward(token_ids)
        ctx.rows, ctx.dim = weight.shape
        return weight[token_ids]

    @staticmethod
    def backward(ctx, grad_output):
        (token_ids,) = ctx.saved_tensors
        ids = token_ids.reshape(-1).long()
        n = ids.numel()
        grad = grad_output.reshape(n, ctx.dim).contiguous()
        bags = torch.arange(n, dtype=torch.long, device=ids.device)
        sizes = torch.ones(n, dtype=torch.long, device=ids.device)
        grad_weight = torch.ops.aten._embedding_bag_dense_backward(
            grad, ids, bags, sizes, torch.zeros_like(ids), ctx.rows, False, 0, None, -1)
        return None, grad_weight
