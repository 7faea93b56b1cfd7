"""Wraps IDs with `% vocab_size` instead of raising, so ID V silently reads row 0."""

MAY_FAIL = ["id_too_large_raises", "several_ids_too_large_raise"]


def embedding(token_ids, weight):
    return weight[token_ids % weight.shape[0]]
