"""Head built on meta and tied; forward calls `F.linear(hidden, self.embedding.weight)` directly."""

import torch
import torch.nn.functional as F
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if torch.logical_or(token_ids < 0, token_ids >= self.num_embeddings).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]


class TiedEmbeddingLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = nn.Linear(embedding_dim, vocab_size, bias=False, device="meta", dtype=dtype)
        self.lm_head.weight = self.embedding.weight

    def forward(self, token_ids):
        return F.linear(self.embedding(token_ids), self.embedding.weight)
