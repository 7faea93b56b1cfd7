"""Delegates to the library kernel `torch.nn.functional.embedding`."""

import torch

MAY_FAIL = ["no_library_embedding_runtime", "no_library_embedding_source"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return torch.nn.functional.embedding(token_ids, weight)
