"""Moves dim to the end, uses max(...).values and unsqueeze, then moves it back."""

import torch


def softmax(x, dim):
    in_dtype = x.dtype
    h = torch.movedim(x.to(torch.float32) if in_dtype != torch.float64 else x, dim, -1)
    shifted = h - h.max(dim=-1).values.unsqueeze(-1)
    num = shifted.exp()
    out = num / num.sum(-1).unsqueeze(-1)
    return torch.movedim(out, -1, dim).to(in_dtype)
