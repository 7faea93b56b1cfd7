"""Multiplies a one-hot matrix by the weight: memory grows as tokens x vocabulary."""

import torch.nn.functional as F

MAY_FAIL = ["memory_independent_of_vocab", "speed"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return F.one_hot(token_ids.long(), num_embeddings).to(weight.dtype) @ weight
