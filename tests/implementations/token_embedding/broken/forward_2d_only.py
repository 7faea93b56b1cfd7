"""Forward assumes (batch, seq_len) IDs, as real students' lookups do (`b, s = token_ids.shape`, then a view to
(b, s, d)): it fails for any other rank. The ordinary checks pass (batch, seq_len) IDs, as the course's tests do,
so the one bug costs the checks that try other shapes and names it there, not every check that draws IDs."""

import torch
from torch import nn

MAY_FAIL = ["output_shape", "scalar_id"]
MESSAGES = {"output_shape": "exactly two dims"}


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError(f"token ids must lie in [0, {self.num_embeddings})")
        batch_size, seq_len = token_ids.shape[0], token_ids.shape[1]
        return self.weight[token_ids.reshape(-1)].view(batch_size, seq_len, self.weight.shape[1])
