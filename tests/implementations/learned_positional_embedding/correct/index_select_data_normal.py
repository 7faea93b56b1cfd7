"""Initialises in place with `weight.data.normal_(0, 0.02)` and gathers rows with `index_select` over an arange."""

import torch
from torch import nn


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        self.weight.data.normal_(mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError("seq_len (%d) > max_seq_len (%d)" % (seq_len, self.max_seq_len))
        index = torch.arange(seq_len, device=self.weight.device)
        return torch.index_select(self.weight, 0, index).to(x.device) + x
