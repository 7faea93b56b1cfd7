"""Holds memory where an address-space limit does not look: memfds, written, never mapped, in two processes.

Each memfd holds 8 MiB (the file-size limit); a child the worker forks holds 64 of them
(512 MiB), then the worker itself adds up to 128 more (1024 MiB): 1.5 GiB together,
over the batch's 1024 MB, though neither process maps a byte of it. Under ``RLIMIT_AS``
alone every one of those pages is invisible (the red team held 1.5 GiB under
``--memory 512``); a memory cgroup counts them, for both processes, and its
out-of-memory killer stops them.
"""

import os
import sys
import time

import torch
from torch import nn

CHUNK = b"\x01" * (8 << 20)
_HELD = []


def _hoard(count):
    for _ in range(count):
        fd = os.memfd_create("hoard")
        os.write(fd, CHUNK)
        _HELD.append(fd)


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

    def __call__(self, token_ids):
        ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            _hoard(64)
            os.write(ready_w, b"1")
            time.sleep(600)
            os._exit(0)
        os.read(ready_r, 1)
        for n in range(128):
            _hoard(1)
            print(f"memfd hoard: {512 + 8 * (n + 1)} MiB held by two processes", flush=True)
        print("memfd hoard: all 1536 MiB held", flush=True)
        sys.stdout.flush()
        return self.forward(token_ids)


EXPECT = {"fail": ["matches_reference", "output_shape"], "message": "memory limit of 1024 MB exceeded",
          "needs": "cgroup"}
