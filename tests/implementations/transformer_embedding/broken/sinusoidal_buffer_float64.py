"""The sinusoidal table is built in float64 and registered with `.to(dtype=dtype)`: with dtype=None
it stays float64, so the float32 token embeddings are promoted and the output comes back float64."""

import math

import torch
from torch import nn

MAY_FAIL = ["sinusoidal_positions"]


class _Table(nn.Module):
    def __init__(self, rows, cols, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(rows, cols, device=device, dtype=dtype))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)


def _sinusoids(length, dim):
    if dim % 2 == 1:
        raise ValueError(f"embedding_dim={dim} is odd; sinusoidal positions need sin/cos pairs")
    freqs = torch.exp(-math.log(10000.0) * torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(length, dtype=torch.float64)[:, None] * freqs[None, :]
    out = torch.empty(length, dim, dtype=torch.float64)
    out[:, 0::2], out[:, 1::2] = angles.sin(), angles.cos()
    return out


class TransformerEmbedding(nn.Module):
    def __init__(self, vocab_size, embedding_dim, max_seq_len, dropout=0.0, padding_idx=None,
                 positional="learned", scale=True, device=None, dtype=None):
        super().__init__()
        if positional not in ("learned", "sinusoidal", "none"):
            raise ValueError("positional must be 'learned', 'sinusoidal' or 'none'")
        if not 0.0 <= dropout < 1.0:
            raise ValueError("dropout must be >= 0 and < 1")
        if padding_idx is not None and not 0 <= padding_idx < vocab_size:
            raise ValueError(f"padding_idx must be a valid token id in [0, {vocab_size})")
        self.vocab_size, self.embedding_dim, self.max_seq_len = vocab_size, embedding_dim, max_seq_len
        self.dropout_p, self.padding_idx, self.positional = dropout, padding_idx, positional
        self.multiplier = math.sqrt(embedding_dim) if scale else 1.0
        self.token_embedding = _Table(vocab_size, embedding_dim, device, dtype)
        if padding_idx is not None:
            with torch.no_grad():
                self.token_embedding.weight[padding_idx] = torch.zeros(embedding_dim)
        if positional == "learned":
            self.position_embedding = _Table(max_seq_len, embedding_dim, device, dtype)
        elif positional == "sinusoidal":
            table = _sinusoids(max_seq_len, embedding_dim).to(device=device, dtype=dtype)
            self.register_buffer("table", table, persistent=False)

    def _positions(self, seq_len, like):
        if self.positional == "learned":
            if seq_len > self.max_seq_len:
                raise ValueError(f"{seq_len} positions requested, max_seq_len is {self.max_seq_len}")
            return self.position_embedding.weight[:seq_len]
        if self.positional == "sinusoidal":
            if seq_len <= self.table.shape[0]:
                return self.table[:seq_len]
            return _sinusoids(seq_len, self.embedding_dim).to(like)
        return like.new_zeros(seq_len, self.embedding_dim)

    def forward(self, token_ids):
        w = self.token_embedding.weight
        bad = (token_ids < 0) | (token_ids >= self.vocab_size)
        if bad.any():
            raise IndexError(f"token id {token_ids[bad].flatten()[0].item()} not in [0, {self.vocab_size})")
        emb = w.index_select(0, token_ids.reshape(-1)).view(*token_ids.shape, self.embedding_dim)
        if self.padding_idx is not None and emb.requires_grad:
            is_pad = (token_ids == self.padding_idx).unsqueeze(-1)
            emb.register_hook(lambda g: g.masked_fill(is_pad, 0.0))
        x = emb * self.multiplier + self._positions(token_ids.shape[-1], emb)
        if self.training and self.dropout_p > 0.0:
            keep = torch.rand_like(x) >= self.dropout_p
            x = x * keep.to(x.dtype) * (1.0 / (1.0 - self.dropout_p))
        return x
