"""Returns `(num_tokens, embedding_dim)`: looks up the flattened IDs and forgets to restore the leading shape."""

CAUGHT_BY = ["shape"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids.reshape(-1)]
