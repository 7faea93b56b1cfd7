"""Padding row protected by a gradient hook on the weight Parameter; dropout written by hand as a Bernoulli keep-mask divided by (1 - p).

The hook lives on the Parameter object: it survives load_state_dict and
.to(), but not copy.deepcopy() (deepcopy does not copy tensor hooks).
"""

import math

import torch
from torch import nn


class TokenTable(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))


class PositionTable(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))


class TransformerEmbedding(nn.Module):
    def __init__(self, vocab_size, embedding_dim, max_seq_len, dropout=0.0, padding_idx=None,
                 positional="learned", scale=True, device=None, dtype=None):
        super().__init__()
        if positional not in ("learned", "sinusoidal", "none"):
            raise ValueError(f"unknown positional {positional!r}; valid: learned, sinusoidal, none")
        if dropout < 0 or dropout >= 1:
            raise ValueError(f"dropout probability must satisfy 0 <= p < 1, got {dropout}")
        if padding_idx is not None and (padding_idx < 0 or padding_idx >= vocab_size):
            raise ValueError(f"padding_idx must be in [0, {vocab_size}), got {padding_idx}")
        if positional == "sinusoidal" and embedding_dim % 2:
            raise ValueError("sinusoidal positions need an even embedding_dim (sin/cos pairs)")
        self.vocab_size = vocab_size
        self.dim = embedding_dim
        self.max_seq_len = max_seq_len
        self.dropout = dropout
        self.padding_idx = padding_idx
        self.positional = positional
        self.use_scale = scale
        self.token_embedding = TokenTable(vocab_size, embedding_dim, device, dtype)
        nn.init.normal_(self.token_embedding.weight, 0.0, 0.02)
        if padding_idx is not None:
            with torch.no_grad():
                self.token_embedding.weight[padding_idx].fill_(0)
            self.token_embedding.weight.register_hook(self._mask_padding_grad)
        if positional == "learned":
            self.position_embedding = PositionTable(max_seq_len, embedding_dim, device, dtype)
            nn.init.normal_(self.position_embedding.weight, 0.0, 0.02)
        elif positional == "sinusoidal":
            self.register_buffer("sinusoid", self._sinusoid(max_seq_len).to(device=device, dtype=dtype), persistent=False)

    def _mask_padding_grad(self, grad):
        grad = grad.clone()
        grad[self.padding_idx] = 0
        return grad

    def _sinusoid(self, n):
        i = torch.arange(0, self.dim, 2, dtype=torch.float64)
        angle = torch.arange(n, dtype=torch.float64)[:, None] / torch.pow(10000.0, i / self.dim)
        table = torch.zeros(n, self.dim, dtype=torch.float64)
        table[:, 0::2] = angle.sin()
        table[:, 1::2] = angle.cos()
        return table.to(torch.get_default_dtype())

    def forward(self, token_ids):
        weight = self.token_embedding.weight
        if ((token_ids < 0) | (token_ids >= self.vocab_size)).any():
            raise IndexError(f"token ids must be in [0, {self.vocab_size})")
        x = weight[token_ids]
        if self.use_scale:
            x = x * math.sqrt(self.dim)
        seq_len = token_ids.shape[-1]
        if self.positional == "learned":
            if seq_len > self.max_seq_len:
                raise ValueError(f"seq_len {seq_len} > max_seq_len {self.max_seq_len}")
            x = x + self.position_embedding.weight[:seq_len]
        elif self.positional == "sinusoidal":
            table = self.sinusoid if seq_len <= self.sinusoid.shape[0] else self._sinusoid(seq_len).to(self.sinusoid.device)
            x = x + table[:seq_len].to(x.dtype)
        if self.training and self.dropout > 0:
            keep = torch.empty_like(x).bernoulli_(1.0 - self.dropout)
            x = x * keep / (1.0 - self.dropout)
        return x
