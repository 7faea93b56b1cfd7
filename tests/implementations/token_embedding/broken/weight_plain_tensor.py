"""Stores the weight as a plain tensor with `requires_grad=True` instead of an `nn.Parameter`: not registered, absent from parameters() and state_dict()."""

import torch
from torch import nn

BREAKS_EVERY_CALL_ON_A_DEVICE = True  # a tensor left on the CPU: on a GPU the first call fails
MAY_FAIL = ["gradcheck", "init_distribution", "init_independent", "init_reproducible", "parameters",
            "repeated_ids_accumulate", "untouched_rows_zero", "weight_gradient"]
MESSAGES = {"parameters": "plain tensor attribute", "weight_gradient": "not a registered nn.Parameter"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        weight = torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype)
        nn.init.trunc_normal_(weight, mean=0.0, std=1.0, a=-3.0, b=3.0)
        self.weight = weight.requires_grad_()

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        return self.weight[token_ids]
