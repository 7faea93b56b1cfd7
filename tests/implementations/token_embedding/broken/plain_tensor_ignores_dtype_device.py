"""The table is a plain tensor attribute (no nn.Parameter) created without `device` or `dtype`."""

import torch
from torch import nn

BREAKS_EVERY_CALL_ON_A_DEVICE = True  # a tensor left on the CPU: on a GPU the first call fails
MAY_FAIL = ["parameters", "honours_dtype", "meta_device", "weight_gradient", "repeated_ids_accumulate",
            "untouched_rows_zero", "gradcheck", "init_distribution", "init_independent", "init_reproducible"]
MESSAGES = {"meta_device": "(a plain tensor attribute)", "honours_dtype": "(a plain tensor attribute)",
            "weight_gradient": "not a registered nn.Parameter"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = torch.empty(num_embeddings, embedding_dim)
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
