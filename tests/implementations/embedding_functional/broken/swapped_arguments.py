"""Declares `embedding(weight, token_ids)`: the arguments are in the wrong order for the contract."""

MAY_FAIL = ["boundary_ids", "gradcheck", "int32_ids", "keeps_weight_dtype", "matches_reference",
            "memory_independent_of_vocab", "no_library_embedding_runtime", "no_library_embedding_source",
            "output_shape", "repeated_ids_accumulate", "scalar_id", "signature", "speed",
            "untouched_rows_zero", "vectorised", "weight_gradient", "zero_size_ids",
            # every call fails, so the self-comparing checks observe nothing and report that error
            "inputs_as_views", "inputs_unchanged"]


def embedding(weight, token_ids):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return weight[token_ids]
