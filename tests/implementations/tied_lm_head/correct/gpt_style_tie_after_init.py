"""The classic GPT tie: build a normal `nn.Linear(bias=False)` head, then `self.lm_head.weight = self.embedding.weight` (the head's own init is thrown away)."""

import torch
from torch import nn


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty((num_embeddings, embedding_dim), device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        flat = token_ids.reshape(-1)
        if ((flat < 0) | (flat >= self.num_embeddings)).any():
            raise IndexError(f"token id out of range [0, {self.num_embeddings})")
        return self.weight.index_select(0, flat).reshape(*token_ids.shape, self.weight.shape[1])


class TiedEmbeddingLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = nn.Linear(embedding_dim, vocab_size, bias=False, device=device, dtype=dtype)
        self.lm_head.weight = self.embedding.weight

    def forward(self, token_ids):
        hidden = self.embedding(token_ids)
        return self.lm_head(hidden)
