"""Always normalises over the last axis, whatever dim says."""

import torch

MAY_FAIL = ["matches_reference", "no_library_softmax_source", "large_inputs_stable", "gradient"]


def softmax(x, dim):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    e = torch.exp(wide - wide.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
