"""`reset_parameters` seeds its own generator with a constant, so every layer gets identical weights.

Distribution and reproducibility are fine; only the check that two layers
built one after the other differ catches it.
"""

import torch
from torch import nn

MAY_FAIL = ["init_independent"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight.is_meta:
            return
        generator = torch.Generator(device=self.weight.device).manual_seed(1234)
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0, generator=generator)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
