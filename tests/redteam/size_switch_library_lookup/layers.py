"""Uses the library lookup only on inputs larger than any traced run: the run-time ban is judged on the op-count
check's traced runs, whose sizes the spec publishes, so a layer can keep the library kernel out of them. What
catches it is the source scan, which reads the code the layer runs whatever the size (a name built at run time
included); the traced runs were never the only evidence."""

import torch
import torch.nn.functional as F
from torch import nn

_NAME = "".join(["emb", "edding"])


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        if token_ids.numel() > 1000:  # above every traced size: only the speed check's runs get here
            return getattr(F, _NAME)(token_ids, self.weight)
        return self.weight[token_ids]


EXPECT = {"fail": ["no_library_embedding_source"], "message": "uses torch.nn.functional.embedding",
          "passes": ["matches_reference", "vectorised"]}
