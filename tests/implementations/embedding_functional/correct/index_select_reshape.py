"""`torch.index_select` on the flattened IDs, then a reshape to `(..., embedding_dim)`."""

import torch


def embedding(token_ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    vocab_size, embedding_dim = weight.shape
    flat = token_ids.flatten()
    invalid = (flat < 0) | (flat >= vocab_size)
    if invalid.any():
        raise IndexError(f"token id {flat[invalid][0].item()} is not in [0, {vocab_size})")
    return torch.index_select(weight, 0, flat).reshape(*token_ids.shape, embedding_dim)
