"""Shows a truncated-normal decoy through named_parameters(), but looks up a zero table until weights are loaded.

Sampling named_parameters() saw the decoy; the init checks now sample what forward returns for every ID.
"""

import torch
from torch import nn

CAUGHT_BY = ["init"]
CAUGHT_BY_CHECKS = ["init_distribution"]
MAY_FAIL = ["init_distribution", "init_independent", "init_reproducible"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        self._fresh_version = self.weight._version  # loading weights (copy_) bumps it
        self.register_buffer("_used_table", torch.zeros_like(self.weight), persistent=False)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        if self.weight._version == self._fresh_version:
            return self.weight[token_ids] * 0 + self._used_table[token_ids]  # never loaded: the zero table
        return self.weight[token_ids]
