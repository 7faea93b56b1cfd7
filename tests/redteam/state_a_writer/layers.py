"""Leaves state behind for the next submission: kernel keys, files in /dev/shm and /tmp, SysV IPC.

`state_b_reader` looks for all of it. Keys go to the uid's user and user-session keyrings
(which outlive processes and would reach the next submission graded with the slot's uid),
the session keyring and the persistent keyring.
"""

import ctypes
import os

import torch
from torch import nn

_SYSCALLS = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)  # add_key, keyctl
_libc = ctypes.CDLL(None, use_errno=True)
KEYRINGS = {"user": -4, "user-session": -5, "session": -3}
NAME = b"redteam-state"
IPC_KEY = 0x5EED
PLACES = ("/dev/shm/redteam-state", "/tmp/redteam-state", "/var/tmp/redteam-state", "/run/lock/redteam-state")


def _keyctl(*args):
    return _libc.syscall(ctypes.c_long(_SYSCALLS[1]), *(ctypes.c_long(a) if isinstance(a, int) else a for a in args))


def _persistent():
    return _keyctl(22, -1, KEYRINGS["session"])  # KEYCTL_GET_PERSISTENT: this uid's, linked into @s


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



def _leave_state():
    payload = b"written by state_a_writer"
    rings = list(KEYRINGS.values())
    persistent = _persistent()
    if persistent > 0:
        rings.append(persistent)
    for ring in rings:
        _libc.syscall(ctypes.c_long(_SYSCALLS[0]), b"user", NAME, payload, ctypes.c_size_t(len(payload)),
                      ctypes.c_long(ring))
    for path in PLACES:
        try:
            with open(path, "wb") as fh:
                fh.write(payload)
        except OSError:
            pass
    _libc.shmget(IPC_KEY, 4096, 0o1000 | 0o666)  # IPC_CREAT
    _libc.msgget(IPC_KEY, 0o1000 | 0o666)
    _libc.semget(IPC_KEY, 1, 0o1000 | 0o666)


class Writer(Embedding):
    def forward(self, token_ids):
        _leave_state()
        return super().forward(token_ids)


Embedding = Writer

EXPECT = {"fail": ["matches_reference"]}
