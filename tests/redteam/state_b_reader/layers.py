"""Looks for what `state_a_writer` left behind (keys, /dev/shm and /tmp files, SysV IPC objects).

It reports what it saw in an exception, so the report says "state seen: nothing" only if no
state crossed from the earlier submission.
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



def _look():
    seen = []
    rings = dict(KEYRINGS)
    persistent = _persistent()
    if persistent > 0:
        rings["persistent"] = persistent
    for name, ring in rings.items():
        if _keyctl(10, ring, b"user", NAME, 0) > 0:  # KEYCTL_SEARCH
            seen.append(f"a key in the {name} keyring")
    try:
        with open("/proc/keys") as fh:
            if NAME.decode() in fh.read():
                seen.append("a key in /proc/keys")
    except OSError:
        pass
    seen += [path for path in PLACES if os.path.exists(path)]
    for what in ("shmget", "msgget", "semget"):
        args = (IPC_KEY, 0, 0) if what != "msgget" else (IPC_KEY, 0)
        if getattr(_libc, what)(*args) >= 0:
            seen.append(f"a SysV {what[:3]} object")
    return seen


class Reader(Embedding):
    def forward(self, token_ids):
        seen = _look()
        raise RuntimeError(f"state seen: {', '.join(seen) or 'nothing'}")


Embedding = Reader

EXPECT = {"fail": ["matches_reference"], "message": "state seen: nothing"}
