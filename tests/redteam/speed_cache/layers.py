"""A slow per-element Python loop whose results are cached by input: when the warm-up and every timed try (and
every pass of a try) see the same token IDs, only the first computation is slow and the speed check passes.
The timed runs draw fresh inputs for every try and every pass, so the cache never hits: `speed` fails."""

import torch
from torch import nn

_CACHE = {}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        key = (tuple(token_ids.shape), token_ids.cpu().numpy().tobytes(),
               hash(self.weight.detach().cpu().numpy().tobytes()))
        rows = _CACHE.get(key)
        if rows is None:
            table = self.weight.detach().tolist()
            rows = torch.tensor([[v for v in table[i]] for i in token_ids.reshape(-1).tolist()],
                                dtype=self.weight.dtype).reshape(*token_ids.shape, self.weight.shape[1])
            _CACHE[key] = rows
        looked_up = self.weight[token_ids]  # the gradient path
        return rows + (looked_up - looked_up.detach())

EXPECT = {"fail": ["speed"]}
