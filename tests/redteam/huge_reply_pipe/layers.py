"""Writes a reply claiming a 1 GiB tensor on the reply pipe and streams the bytes.

The grader used to buffer all of it (3.9 GB); it must refuse on the length, before reading the bytes."""

import json
import os
import stat
import struct

import torch
from torch import nn


class Embedding(nn.Module):
    """Wrong on purpose: every looked-up row is doubled."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * 2


def _forge(payload):
    """Write ``payload`` on every pipe or socket that might be the reply channel, then carry on."""
    for fd in range(3, 16):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.write(fd, payload)
        except OSError:
            pass


class Forged(Embedding):
    def __call__(self, token_ids):
        header = json.dumps({'ok': True, 'output': {'__tensor__': 0, 'dtype': 'uint8', 'shape': [1 << 30]}}).encode()
        _forge(struct.pack('<I', len(header)) + header + struct.pack('<Q', 1 << 30))
        chunk = bytes(1 << 20)
        for _ in range(1024):
            _forge(chunk)
        return torch.zeros(*token_ids.shape, 3)


Embedding = Forged


EXPECT = {"fail": ["matches_reference", "output_shape", "weight_gradient"], "message": "larger than the grader accepts"}
