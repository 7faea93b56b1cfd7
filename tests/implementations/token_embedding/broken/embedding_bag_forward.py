"""Looks rows up with the library's bag kernel (`F.embedding_bag`, one ID per bag), missing from the old lists.

Its forward runs aten._embedding_bag_forward_only / aten._embedding_bag and its backward
aten._embedding_bag_backward: the `aten.*embedding*` family and the source list catch both.
"""

import torch
import torch.nn.functional as F
from torch import nn

CAUGHT_BY = ["constraint"]
MAY_FAIL = ["no_library_embedding_source", "no_library_embedding_runtime"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        flat = token_ids.reshape(-1, 1).long()
        rows = F.embedding_bag(flat, self.weight, mode="sum")
        return rows.reshape(*token_ids.shape, self.weight.shape[1])
