"""Loops over the tokens in Python and stacks one row per token: the op count grows with the number of tokens."""

import torch

MAY_FAIL = ["speed", "vectorised"]


def embedding(token_ids, weight):
    num_embeddings, embedding_dim = weight.shape
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    if token_ids.numel() == 0:
        return weight.new_zeros(*token_ids.shape, embedding_dim)
    rows = [weight[i] for i in token_ids.reshape(-1).tolist()]
    return torch.stack(rows).reshape(*token_ids.shape, embedding_dim)
