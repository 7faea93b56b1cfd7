"""Reads seq_len as `x.shape[1]`, which is only right for 3-D (batch, seq_len, dim) inputs."""

import torch
from torch import nn

MAY_FAIL = ["empty_sequence", "forward_keeps_weights", "full_length", "gradcheck", "gradient", "honours_dtype",
            "matches_reference", "no_library_embedding_runtime", "no_library_embedding_source",
            "output_shape", "too_long_message", "too_long_raises", "unused_rows_zero",
            # the check that names it: (seq_len, dim) with no batch dim reads dim as seq_len
            "no_leading_dims"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[1]
        if seq_len > self.max_seq_len:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.max_seq_len}")
        return x + self.weight[:seq_len]
