"""After the lookup, forward renormalises the looked-up rows of `weight` in place (a max-norm idea applied at the wrong time).

The output of the first call and its gradient are right; the weights change
under the caller, so a second call differs. Needs at least one token.
"""

import torch
from torch import nn

MAY_FAIL = ["forward_keeps_weights", "scalar_id", "speed",
            # the weight it changes is what the next call of a sequence reads
            "calls_in_sequence"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        out = self.weight[token_ids]
        with torch.no_grad():
            rows = self.weight[token_ids]
            self.weight[token_ids] = rows / rows.norm(dim=-1, keepdim=True).clamp(min=1e-6)
        return out
