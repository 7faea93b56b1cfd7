"""Calls the Tensor.softmax method, which a name search may miss: the runtime trace sees aten._softmax."""

import torch

MAY_FAIL = ["no_library_softmax_source", "no_library_softmax_runtime"]
MESSAGES = {"no_library_softmax_runtime": "aten._softmax"}


def softmax(x, dim):
    return x.softmax(dim)
