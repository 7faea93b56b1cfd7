"""GPT-2 style: builds `positions = arange(seq_len)` on x's device and looks the rows up with `weight[positions]`."""

import torch
from torch import nn


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len: int, embedding_dim: int, device=None, dtype=None):
        factory_kwargs = {"device": device, "dtype": dtype}
        super().__init__()
        self.max_seq_len = max_seq_len
        self.embedding_dim = embedding_dim
        self.weight = nn.Parameter(torch.empty((max_seq_len, embedding_dim), **factory_kwargs))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.size(-2)
        if seq_len > self.max_seq_len:
            raise ValueError(f"got seq_len={seq_len} but max_seq_len={self.max_seq_len}")
        positions = torch.arange(seq_len, device=x.device)
        return x + self.weight[positions]
