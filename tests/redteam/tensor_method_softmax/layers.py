"""Calls the library softmax as a Tensor method, `x.softmax(dim)`: the same kernel as `torch.softmax`, under
a name a scan of dotted module names never sees. Graded on the softmax challenge."""

import torch


def softmax(x, dim):
    return x.softmax(dim)

EXPECT = {"challenge": "softmax", "fail": ["no_library_softmax_source", "no_library_softmax_runtime"],
          "review": ["no_library_softmax_source"], "message": "torch.Tensor.softmax"}
