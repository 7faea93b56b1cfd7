"""Model layers, named the student's way: the grader finds them through pyproject.toml."""

import torch
from torch import nn

from .nn_utils import lookup_rows


class MyEmbedding(nn.Module):
    """Token embedding whose table is called `table`, built from (vocab_size, d_model)."""

    def __init__(self, vocab_size, d_model, device=None, dtype=None):
        super().__init__()
        self.vocab_size = vocab_size
        self.table = nn.Parameter(torch.empty((vocab_size, d_model), device=device, dtype=dtype))
        nn.init.trunc_normal_(self.table, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        return lookup_rows(token_ids, self.table)


class PositionTable(nn.Module):
    """Learned positions; its constructor calls device and dtype `dev` and `dt`."""

    def __init__(self, context_length, d_model, dev=None, dt=None):
        super().__init__()
        self.context_length = context_length
        self.pe = nn.Parameter(torch.empty((context_length, d_model), device=dev, dtype=dt))
        nn.init.normal_(self.pe, mean=0.0, std=0.02)

    def forward(self, x):
        seq_len, limit = x.shape[-2], self.context_length
        if seq_len > limit:
            raise ValueError(f"sequence length {seq_len} exceeds the table's {limit} positions")
        return x + self.pe[:seq_len]
