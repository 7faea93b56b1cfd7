"""Tries to write outside its scratch dir: the grader's code, the outputs, other submissions, /tmp."""

import glob
import os

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

TARGETS = ["/work/main/validator/api.py", "/work/main/validator/grading.py", "/tmp/redteam-was-here",
           "/var/tmp/redteam-was-here", "/dev/shm/redteam-was-here", "../redteam-was-here"]
for pattern in ("/tmp/*/*/aa_control/layers.py", "/tmp/*/*/*.json", "/tmp/*/*/grades.csv", "/tmp/*/*/zz_control/layers.py"):
    TARGETS += glob.glob(pattern)
try:
    import validator

    TARGETS.append(os.path.join(os.path.dirname(validator.__file__), "api.py"))
except Exception:  # noqa: BLE001
    pass
for target in TARGETS:
    try:
        with open(target, "a") as fh:
            fh.write("\nraise SystemExit('pwned')\n")
        print("wrote", target)
    except OSError as exc:
        print("refused", target, exc)

EXPECT = {"fail": ["matches_reference"], "writes_nothing": True}
