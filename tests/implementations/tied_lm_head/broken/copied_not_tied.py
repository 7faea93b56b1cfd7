"""Copies the embedding matrix into a second Parameter at init: equal values, but two parameters (2*V*D) that drift apart in training."""

import torch
from torch import nn

MAY_FAIL = ["gradient_sums_both_paths", "logits", "no_library_embedding_source", "parameter_count",
            "repeated_ids_accumulate", "shared_parameter"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]})")
        return self.weight[token_ids]


class TiedEmbeddingLM(nn.Module):
    def __init__(self, vocab_size, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        self.lm_head = nn.Linear(embedding_dim, vocab_size, bias=False, device="meta", dtype=dtype)
        self.lm_head.weight = nn.Parameter(self.embedding.weight.detach().clone())

    def forward(self, token_ids):
        return self.lm_head(self.embedding(token_ids))
