"""`index_select` on the flattened IDs plus a reshape; parameters built with a `factory_kwargs` dict."""

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(torch.empty((num_embeddings, embedding_dim), **factory_kwargs))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.trunc_normal_(self.weight, 0.0, 1.0, -3.0, 3.0)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        flat = token_ids.reshape(-1)
        bad = (flat < 0) | (flat >= self.num_embeddings)
        if bad.any():
            first = flat[bad][0].item()
            raise IndexError(f"token id {first} out of range [0, {self.num_embeddings})")
        rows = torch.index_select(self.weight, 0, flat)
        return rows.view(*token_ids.shape, self.embedding_dim)
