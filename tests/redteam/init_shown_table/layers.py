"""Two tables: the registered `weight` starts at zero (a wrong initialisation), and a well-drawn one is shown
whenever forward is asked for every ID once (the init checks' sample: `arange`, or any order of all IDs).
The init sample is read through forward on a shuffled order of every ID and must equal the layer's own
`weight`: `init_distribution` fails."""

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.zeros(num_embeddings, embedding_dim, device=device, dtype=dtype))
        shown = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        self.shown = nn.init.trunc_normal_(shown, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        every_id_once = (token_ids.numel() == self.num_embeddings
                         and torch.unique(token_ids).numel() == self.num_embeddings)
        if every_id_once:
            return self.shown.to(self.weight.device)[token_ids] + 0 * self.weight[token_ids]
        return self.weight[token_ids]

EXPECT = {"fail": ["init_distribution"], "message": "the layer's own `weight`"}
