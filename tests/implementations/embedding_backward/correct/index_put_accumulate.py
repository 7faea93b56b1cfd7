"""Forward with `index_select`; backward with `index_put_(..., accumulate=True)`, which sums repeated IDs; skips work when weight needs no gradient."""

import torch


class EmbeddingFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, token_ids, weight):
        vocab = weight.size(0)
        flat = token_ids.reshape(-1)
        bad = (flat < 0) | (flat >= vocab)
        if bad.any():
            raise IndexError(f"token id {flat[bad][0].item()} outside [0, {vocab})")
        ctx.save_for_backward(flat)
        ctx.vocab = vocab
        return weight.index_select(0, flat).reshape(*token_ids.shape, weight.size(1))

    @staticmethod
    def backward(ctx, grad_output):
        if not ctx.needs_input_grad[1]:
            return None, None
        (flat,) = ctx.saved_tensors
        dim = grad_output.size(-1)
        grad_weight = grad_output.new_zeros(ctx.vocab, dim)
        grad_weight.index_put_((flat.long(),), grad_output.reshape(-1, dim), accumulate=True)
        return None, grad_weight
