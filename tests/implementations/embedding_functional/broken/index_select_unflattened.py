"""Passes the IDs straight to `index_select`, which needs a 1-D index: fails for 2-D and deeper IDs, gives (1, D) for 0-d IDs."""

import torch

CAUGHT_BY = ["shape"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return torch.index_select(weight, 0, token_ids)
