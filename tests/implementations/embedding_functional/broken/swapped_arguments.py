"""Declares `embedding(weight, token_ids)`: the arguments are in the wrong order for the contract."""

CAUGHT_BY = ["structure"]


def embedding(weight, token_ids):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids]
