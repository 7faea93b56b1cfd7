"""`torch.take` on the flattened weight with offsets `id * embedding_dim + column`."""

import torch


def embedding(token_ids, weight):
    vocab_size, embedding_dim = weight.shape
    bad = torch.logical_or(token_ids < 0, token_ids >= vocab_size)
    if bad.any():
        raise IndexError(f"out-of-range token id {token_ids[bad].reshape(-1)[0].item()} (vocabulary has {vocab_size} rows)")
    columns = torch.arange(embedding_dim, device=token_ids.device)
    offsets = token_ids.long().unsqueeze(-1) * embedding_dim + columns
    return torch.take(weight, offsets)
