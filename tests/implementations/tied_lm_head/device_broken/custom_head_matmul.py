"""A tiny hand-written head module that holds the shared Parameter and computes `x @ weight.T`; negative IDs wrap (only the advisory check notices)."""

# On a GPU this breaks the contract: CUDA indexing has no IndexError for IDs >= num_embeddings,
# only a device-side assert that leaves the device unusable, so the range must be checked explicitly.
# Full marks on the CPU; caught by id_too_large_raises with --device cuda.

MAY_FAIL = ["id_too_large_raises"]  # on a GPU; full marks on the CPU

import torch
from torch import nn


class Lookup(nn.Module):
    def __init__(self, vocab_size, dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, 0.0, 1.0, -3.0, 3.0)

    def forward(self, ids):
        return self.weight[ids]


class TiedHead(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    def forward(self, x):
        return x @ self.weight.T


class TiedEmbeddingLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.embedding = Lookup(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = TiedHead(self.embedding.weight)

    def forward(self, token_ids):
        return self.lm_head(self.embedding(token_ids))
