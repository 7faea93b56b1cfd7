"""Renames the constructor's arguments (vocab_size, dim) and the table (`embeddings`); the lookup is right."""

import torch
from torch import nn

MAY_FAIL = ["signature", "parameters"]
MESSAGES = {"signature": "does not match the contract", "parameters": "found `embeddings`"}


class Embedding(nn.Module):
    def __init__(self, vocab_size, dim, device=None, dtype=None):
        super().__init__()
        self.vocab_size = vocab_size
        self.embeddings = nn.Parameter(torch.empty(vocab_size, dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.embeddings, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.vocab_size)).any():
            raise IndexError(f"token ids must lie in [0, {self.vocab_size})")
        return self.embeddings[token_ids]
