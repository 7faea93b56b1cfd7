"""exp(x - logsumexp(x)): the log-domain formulation, stable because logsumexp subtracts the max internally."""

import torch


def softmax(x: torch.Tensor, dim: int) -> torch.Tensor:
    work = x.to(torch.promote_types(x.dtype, torch.float32))
    return torch.exp(work - torch.logsumexp(work, dim=dim, keepdim=True)).to(x.dtype)
