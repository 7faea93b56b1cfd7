"""Indexes `weight.data`: the values are right but the result does not depend on `weight` for autograd."""

MAY_FAIL = ["gradcheck", "repeated_ids_accumulate", "untouched_rows_zero", "weight_gradient"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight.data[token_ids]
