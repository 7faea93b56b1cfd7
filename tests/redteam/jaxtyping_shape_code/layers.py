"""Hides the library lookup in a jaxtyping shape: jaxtyping evaluates a symbolic dimension ("n+1") with eval,
so `isinstance(ids, Int[torch.Tensor, "<expression>"])` runs whatever the string holds. A shape may hold names,
numbers and arithmetic only."""

import torch
from jaxtyping import Int
from torch import nn

_BOX = {}
_SHAPE = "*b 1+0*len(str(exec(bytes.fromhex(\"696d706f7274207379730a66203d207379732e5f6765746672616d6528290a7768696c652066206973206e6f74204e6f6e6520616e6420225f424f5822206e6f7420696e20662e665f676c6f62616c733a0a2020202066203d20662e665f6261636b0a626f78203d20662e665f676c6f62616c735b225f424f58225d0a696d706f727420746f7263682e6e6e2e66756e6374696f6e616c20617320460a626f785b226f7574225d203d20462e656d62656464696e6728626f785b22696473225d2c20626f785b2277225d290a\").decode())))"


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        _BOX.update(ids=token_ids, w=self.weight)
        isinstance(token_ids.reshape(-1, 1), Int[torch.Tensor, _SHAPE])
        return _BOX.pop("out")

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "which jaxtyping evaluates"}
