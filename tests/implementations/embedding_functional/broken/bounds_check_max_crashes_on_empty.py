"""Checks the range with `token_ids.max()` and `.min()`, which raise on zero-size IDs."""

MAY_FAIL = ["zero_size_ids"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if token_ids.max().item() >= num_embeddings or token_ids.min().item() < 0:
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids]
