"""Returns log-probabilities (x - logsumexp(x)) instead of probabilities."""

import torch

MAY_FAIL = ["matches_reference", "no_library_softmax_source", "large_inputs_stable", "bf16_accuracy", "gradient"]


def softmax(x, dim):
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    shifted = wide - wide.amax(dim=dim, keepdim=True)
    return (shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))).to(x.dtype)
