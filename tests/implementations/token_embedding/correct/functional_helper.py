"""Forward delegates to a module-level `embedding(token_ids, weight)` function that checks the range, then indexes."""

import torch
from torch import nn


def embedding(token_ids, weight):
    vocab = weight.size(0)
    out_of_range = torch.logical_or(token_ids < 0, token_ids >= vocab)
    if torch.any(out_of_range):
        raise IndexError(f"found token id {token_ids[out_of_range].flatten()[0].item()}, expected 0 <= id < {vocab}")
    return weight[token_ids.long()]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        if dtype is None:
            dtype = torch.get_default_dtype()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        torch.nn.init.trunc_normal_(self.weight, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        return embedding(token_ids, self.weight)
