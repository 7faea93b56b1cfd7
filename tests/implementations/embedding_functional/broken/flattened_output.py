"""Returns `(num_tokens, embedding_dim)`: looks up the flattened IDs and forgets to restore the leading shape."""

MAY_FAIL = ["boundary_ids", "keeps_weight_dtype", "matches_reference", "no_library_embedding_runtime",
            "no_library_embedding_source", "output_shape", "repeated_ids_accumulate", "scalar_id", "speed",
            "untouched_rows_zero", "vectorised", "weight_gradient", "zero_size_ids"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids.reshape(-1)]
