"""Handles (batch, seq, d_model) inputs only, as many real students' RMSNorms do (`b, s, d = x.shape`, an einops
pattern 'batch sequence d_model'): the checks that draw other leading shapes fail, and no_leading_dims names it;
the checks that probe how the layer is built (dtype, device, parameters) call it as callers mostly do, with
(batch, seq, d_model) inputs, so the one bug is not charged again by each of them."""

import torch
from torch import nn

MAY_FAIL = ["output_shape", "matches_reference", "no_leading_dims", "eps_inside_sqrt", "custom_eps",
            "scale_invariance", "bf16_accuracy", "fp16_accuracy", "fp16_large_inputs", "gradients",
            "forward_keeps_weights", "no_library_norm_runtime", "calls_in_sequence", "input_unchanged",
            "input_views", "default_eps", "no_library_norm_source"]
MESSAGES = {"no_leading_dims": "not enough values to unpack"}


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        b, s, d = x.shape
        in_dtype = x.dtype
        x = x.to(torch.float32)
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x / rms * self.weight).to(in_dtype).reshape(b, s, d)
