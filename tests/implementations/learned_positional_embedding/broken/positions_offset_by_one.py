"""Starts at row 1 (`weight[1:seq_len + 1]`), leaving row 0 unused; also breaks at seq_len == max_seq_len."""

import torch
from torch import nn

MAY_FAIL = ["full_length", "gradient", "matches_reference", "no_library_embedding_source",
            "unused_rows_zero",
            # at seq_len == max_seq_len the shifted slice is a row short and the sum fails to broadcast
            "output_shape"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.max_seq_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight[1 : seq_len + 1]
