"""Returns `.float()` of the lookup: a float64 weight gives a float32 result."""

MAY_FAIL = ["gradcheck", "keeps_weight_dtype", "repeated_ids_accumulate", "weight_gradient"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids].float()
