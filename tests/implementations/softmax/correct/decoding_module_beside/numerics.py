import torch


def stable_softmax(x, dim):
    wide = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    e = torch.exp(wide - wide.amax(dim=dim, keepdim=True))
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
