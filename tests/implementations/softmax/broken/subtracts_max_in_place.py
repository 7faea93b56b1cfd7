"""Subtracts the maximum from the caller's x in place (``x -= x.amax(...)``, seen in a real repository): the
caller's logits are overwritten. On an x that requires grad, autograd refuses (a leaf used in an in-place
operation), so every check that passes one errors; input_unchanged, which calls it under torch.no_grad() as
generation does, names the cause and says so."""

import torch

# every check whose x requires grad errors at the in-place line (and the source check waits for matches_reference)
MAY_FAIL = ["input_unchanged", "matches_reference", "output_shape", "gradient", "shift_invariance",
            "large_inputs_stable", "bf16_accuracy", "bf16_keeps_dtype", "float64_keeps_dtype", "input_views",
            "no_library_softmax_runtime", "no_library_softmax_source"]
MESSAGES = {"input_unchanged": "With autograd on, the same call fails",
            "matches_reference": "compute into a new tensor instead (x = x - ...)"}


def softmax(x, dim):
    x -= x.amax(dim=dim, keepdim=True)
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    e = torch.exp(wide)
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
