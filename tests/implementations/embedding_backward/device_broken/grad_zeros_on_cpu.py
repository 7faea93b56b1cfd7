"""Right on the CPU, broken on a GPU: backward builds its zero matrix without device=, so on CUDA
`index_add_` mixes a CPU tensor with CUDA gradients. Graded on the CPU it gets full marks; it is
caught only with `--device cuda` (VALIDATOR_TEST_DEVICE=cuda for these tests)."""

MAY_FAIL = ["weight_gradient", "repeated_ids_accumulate", "boundary_rows", "untouched_rows_zero", "gradcheck"]  # on a GPU; full marks on the CPU

import torch


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
        grad_weight = torch.zeros(num_embeddings, embedding_dim, dtype=grad_output.dtype)  # BUG: always on the CPU
        grad_weight.index_add_(0, token_ids.reshape(-1), grad_output.reshape(-1, embedding_dim))
        return None, grad_weight
