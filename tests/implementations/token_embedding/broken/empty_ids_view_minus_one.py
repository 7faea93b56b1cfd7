"""Wrong only for zero-size token_ids: `.view(*shape, -1)` cannot size the feature axis of an empty tensor."""

import torch
from torch import nn

MAY_FAIL = ["zero_size_ids"]
MESSAGES = {"zero_size_ids": "cannot reshape tensor of 0 elements"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        rows = self.weight.index_select(0, token_ids.reshape(-1).long())
        return rows.view(*token_ids.shape, -1)
