"""Passes the IDs straight to `index_select`, which needs a 1-D index: fails for 2-D and deeper IDs, gives (1, D) for 0-d IDs."""

import torch

MAY_FAIL = ["boundary_ids", "gradcheck", "int32_ids", "keeps_weight_dtype", "matches_reference",
            "no_library_embedding_runtime", "no_library_embedding_source", "output_shape",
            "repeated_ids_accumulate", "scalar_id", "speed", "untouched_rows_zero", "vectorised",
            "weight_gradient", "zero_size_ids",
            # views are drawn with several ID dimensions too, where the unflattened index fails
            "inputs_as_views"]


def embedding(token_ids, weight):
    num_embeddings = weight.shape[0]
    if ((token_ids < 0) | (token_ids >= num_embeddings)).any():
        raise IndexError(f"token ids must lie in [0, {num_embeddings})")
    return torch.index_select(weight, 0, token_ids)
