"""Looks for the reference, the answer key, other submissions and the grader's environment.

Whatever it finds it prints and puts in an exception message (which reaches the report), and
if it can import the reference it uses it, which would make the wrong embedding pass.
"""

import glob
import os
import sys

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

found = []


def _look():
    found.append(f"/: {sorted(os.listdir('/'))}")
    for depth in ("*", "*/*", "*/*/*"):  # another checkout of the course anywhere near the top
        for name in ("reference/layers.py", "reference/answer_key.yaml"):
            for path in glob.glob(os.path.join("/", depth, name)):
                try:
                    with open(path) as fh:
                        found.append(f"{path}: {fh.read(200)!r}")
                except OSError as exc:
                    found.append(f"{path}: {exc!r}")
    try:
        import validator.paths as p

        roots = [str(p.reference_dir()), str(p.PROJECT_ROOT)]
    except Exception as exc:  # noqa: BLE001
        roots = []
        found.append(f"paths: {exc!r}")
    roots += ["/work", "/autograder", "/srv", os.path.expanduser("~"), "..", "../.."]
    for root in roots:
        for pattern in ("reference/layers.py", "layers.py", "*/layers.py", "answer_key.yaml",
                        "reference/answer_key.yaml", "*/*/layers.py"):
            for path in glob.glob(os.path.join(root, pattern)):
                try:
                    with open(path) as fh:
                        found.append(f"{path}: {fh.read(200)!r}")
                except OSError as exc:
                    found.append(f"{path}: {exc!r}")
    for path in ("/proc/1/environ", f"/proc/{os.getppid()}/environ", "/proc/self/environ"):
        try:
            with open(path, "rb") as fh:
                found.append(f"{path}: {fh.read(4000)!r}")
        except OSError as exc:
            found.append(f"{path}: {exc!r}")
    found.append(f"env: {dict(os.environ)!r}")
    try:
        sys.path.insert(0, "/work/main")
        import reference.layers as ref

        globals()["Embedding"] = ref.Embedding
        found.append("imported the reference")
    except Exception as exc:  # noqa: BLE001
        found.append(f"import reference: {exc!r}")
    print("\n".join(found))


_look()

_original = Embedding.forward


def _leak(self, token_ids):
    raise RuntimeError("LEAK " + " | ".join(found)[:1900])


Embedding.forward = _leak

EXPECT = {"fail": ["matches_reference"], "no_secrets": True}
