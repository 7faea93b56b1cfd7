"""Bare `weight[token_ids]` with no explicit check; negative IDs wrap to the last rows.

Indexing itself raises IndexError for IDs >= num_embeddings, so the contract
holds; only the advisory negative-ID check notices the wrap.
"""

# On a GPU this breaks the contract: CUDA indexing has no IndexError for IDs >= num_embeddings,
# only a device-side assert that leaves the device unusable, so the range must be checked explicitly.
# Full marks on the CPU; caught by id_too_large_raises with --device cuda.

MAY_FAIL = ["id_too_large_raises"]  # on a GPU; full marks on the CPU


def embedding(token_ids, weight):
    return weight[token_ids]
