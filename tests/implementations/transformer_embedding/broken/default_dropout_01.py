"""Everything right except the default: `dropout` defaults to 0.1 instead of 0.0, so a layer built with the
defaults drops elements in training mode (every other check passes `dropout` explicitly)."""

import math

import torch
import torch.nn.functional as F
from torch import nn

MAY_FAIL = ["default_configuration"]


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
            raise IndexError(f"token ids must lie in [0, {self.weight.shape[0]})")
        return self.weight[token_ids]


class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_seq_len, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_seq_len, embedding_dim, device=device, dtype=dtype))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        seq_len = x.shape[-2]
        if seq_len > self.weight.shape[0]:
            raise ValueError(f"sequence length {seq_len} exceeds max_seq_len {self.weight.shape[0]}")
        return x + self.weight[:seq_len]


def sinusoidal_positional_encoding(max_seq_len, embedding_dim, base=10000.0):
    if embedding_dim % 2:
        raise ValueError(f"embedding_dim must be even for sin/cos pairs, got {embedding_dim}")
    pos = torch.arange(max_seq_len, dtype=torch.float64)[:, None]
    freq = base ** (-torch.arange(0, embedding_dim, 2, dtype=torch.float64) / embedding_dim)
    ang = pos * freq
    return torch.stack([ang.sin(), ang.cos()], dim=-1).reshape(max_seq_len, embedding_dim).to(torch.get_default_dtype())


class TransformerEmbedding(nn.Module):
    def __init__(self, vocab_size, embedding_dim, max_seq_len, dropout=0.1, padding_idx=None,
                 positional="learned", scale=True, device=None, dtype=None):
        super().__init__()
        if positional not in {"learned", "sinusoidal", "none"}:
            raise ValueError(f"positional must be one of 'learned', 'sinusoidal', 'none'; got {positional!r}")
        if not (0.0 <= dropout < 1.0):
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        if padding_idx is not None and not (0 <= padding_idx < vocab_size):
            raise ValueError(f"padding_idx {padding_idx} is outside [0, {vocab_size})")
        self.p = dropout
        self.padding_idx = padding_idx
        self.positional = positional
        self.embedding_dim = embedding_dim
        self.scale = math.sqrt(embedding_dim) if scale else 1.0
        self.token_embedding = Embedding(vocab_size, embedding_dim, device=device, dtype=dtype)
        if padding_idx is not None:
            with torch.no_grad():
                self.token_embedding.weight[padding_idx] = 0.0
        if positional == "learned":
            self.position_embedding = LearnedPositionalEmbedding(max_seq_len, embedding_dim, device=device, dtype=dtype)
        elif positional == "sinusoidal":
            pe = sinusoidal_positional_encoding(max_seq_len, embedding_dim).to(device=device, dtype=dtype)
            self.register_buffer("pe", pe, persistent=False)

    def forward(self, token_ids):
        tok = self.token_embedding(token_ids)
        if self.padding_idx is not None:
            tok = torch.where((token_ids == self.padding_idx)[..., None], tok.detach(), tok)
        x = tok * self.scale
        if self.positional == "learned":
            x = self.position_embedding(x)
        elif self.positional == "sinusoidal":
            seq_len = token_ids.shape[-1]
            pe = self.pe if seq_len <= self.pe.shape[0] else sinusoidal_positional_encoding(seq_len, self.embedding_dim)
            x = x + pe[:seq_len].to(x)
        return F.dropout(x, self.p, self.training)
