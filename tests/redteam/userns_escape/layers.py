"""Creates a user namespace (where it is 'root') to unmount what hides the reference, then reads it.

Mounts inherited into a less privileged user namespace are locked: the cover cannot be lifted.
"""

import ctypes
import os

import torch
from torch import nn

CLONE_NEWUSER, CLONE_NEWNS, MNT_DETACH = 0x10000000, 0x00020000, 2
libc = ctypes.CDLL(None, use_errno=True)
found = []
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0:
    found.append("in a user namespace")
    for target in ("/work/main/reference", "/work/main", "/tmp"):
        rc = libc.umount2(target.encode(), MNT_DETACH)
        found.append(f"umount {target}: {rc} errno {ctypes.get_errno()}")
else:
    found.append(f"unshare refused: errno {ctypes.get_errno()}")
try:
    import validator.paths as p

    with open(p.reference_dir() / "layers.py") as fh:
        found.append("REFERENCE " + fh.read(300))
except Exception as exc:  # noqa: BLE001
    found.append(repr(exc))


class Embedding(nn.Module):
    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(num_embeddings, embedding_dim, device=device, dtype=dtype))

    def forward(self, token_ids):
        raise RuntimeError("LEAK " + " | ".join(found))


EXPECT = {"fail": ["matches_reference"]}
