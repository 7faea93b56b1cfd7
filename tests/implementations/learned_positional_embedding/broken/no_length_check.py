"""No length check: past max_seq_len the slice is too short and the addition fails with a broadcasting RuntimeError, not ValueError."""

import torch
from torch import nn

MAY_FAIL = ["too_long_message", "too_long_raises"]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        return x + self.weight[:seq_len]
