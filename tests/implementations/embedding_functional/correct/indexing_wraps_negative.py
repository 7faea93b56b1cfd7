"""Bare `weight[token_ids]` with no explicit check; negative IDs wrap to the last rows.

Indexing itself raises IndexError for IDs >= num_embeddings, so the contract
holds; only the advisory negative-ID check notices the wrap.
"""


def embedding(token_ids, weight):
    return weight[token_ids]
