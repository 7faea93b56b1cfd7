"""Names the parameter `embeddings` instead of `weight` (state_dict keys differ; the lookup itself is right)."""

import torch
from torch import nn

MAY_FAIL = ["parameters"]
MESSAGES = {"parameters": "found `embeddings` with the right shape"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embeddings = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.embeddings, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.embeddings[token_ids]
