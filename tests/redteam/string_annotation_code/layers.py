"""Hides the library lookup in a string annotation, which `typing.get_type_hints` evaluates in the module's
globals. A type is no call: a call in a string annotation is code the scan must read as code."""

import typing

import torch
from torch import nn

_BOX = {}


def _probe(x: "_BOX.update(out=__import__('torch').nn.functional.embedding(_BOX['ids'], _BOX['w']))"):
    return x


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
        typing.get_type_hints(_probe)
        return _BOX.pop("out")

EXPECT = {"fail": ["no_library_embedding_source", "no_library_embedding_runtime"],
          "review": ["no_library_embedding_source"], "message": "layers.py:12"}
