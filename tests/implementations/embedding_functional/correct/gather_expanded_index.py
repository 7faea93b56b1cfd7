"""`torch.gather` along dim 0 with the IDs expanded across the feature dimension."""

import torch


def embedding(token_ids, weight):
    vocab_size, embedding_dim = weight.shape
    if torch.any(token_ids < 0) or torch.any(token_ids >= vocab_size):
        raise IndexError(f"token ids must be in range [0, {vocab_size})")
    index = token_ids.long().reshape(-1, 1).expand(-1, embedding_dim)
    return weight.gather(0, index).view(*token_ids.shape, embedding_dim)
