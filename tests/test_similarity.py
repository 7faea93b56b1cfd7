"""Code similarity on small synthetic sources (no grading): renaming and reformatting are normalised away,
the handout's stub is boilerplate, copies rank above independent solutions, public solutions are compared."""

from __future__ import annotations

import os

import pytest

from validator.batch import similarity as sim

ORIGINAL = '''
import torch
from torch import nn


def helper(values, dim):
    """Stable softmax."""
    shifted = values - values.amax(dim=dim, keepdim=True)  # subtract the max
    e = torch.exp(shifted)
    return e / e.sum(dim=dim, keepdim=True)


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        in_dtype = x.dtype
        x = x.float()
        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (x * rms * self.weight).to(in_dtype)
'''

# the same code renamed (locals, helper, attributes, parameters), re-laid out, re-quoted, re-commented
COPY = '''
import torch
from torch import nn

def my_soft(v,d) :
    e2 = torch.exp(
        v - v.amax(dim=d, keepdim=True,)
    )
    return (e2 / e2.sum(dim=d,keepdim=True))
class RMSNorm(nn.Module):
  # my own layer!
  def __init__(self, size, epsilon=0.00001, device=None, dtype=None):
    super().__init__()
    self.epsilon = epsilon
    self.weight = nn.Parameter(torch.ones(size, device=device, dtype=dtype))
  def forward(self, inp):
    kept = inp.dtype
    inp = inp.float()
    r = torch.rsqrt(inp.pow(2).mean(dim=-1, keepdim=True) + self.epsilon)
    return (inp * r * self.weight).to(kept)
'''

INDEPENDENT = '''
import torch
from torch import nn


def helper(values, dim):
    m = torch.max(values, dim=dim, keepdim=True).values
    num = torch.exp(values - m)
    return num / torch.sum(num, dim=dim, keepdim=True)


class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model, device=device, dtype=dtype))

    def forward(self, x):
        orig = x.dtype
        x32 = x.to(torch.float32)
        ms = (x32 * x32).mean(-1, keepdim=True)
        return (self.weight * (x32 / torch.sqrt(ms + self.eps))).to(orig)
'''


def texts(source: str) -> list[str]:
    return [t[0] for t in sim.normalise(source)]


def test_renaming_and_reformatting_are_normalised_away():
    # the shift is inlined in the copy, so compare the class, which differs only by names and layout
    cls = ORIGINAL[ORIGINAL.index("class RMSNorm"):]
    copy_cls = COPY[COPY.index("class RMSNorm"):]
    assert texts(cls) == texts(copy_cls)
    tokens = texts(ORIGINAL)
    assert "torch" in tokens and "rsqrt" in tokens and "keepdim" in tokens  # what it uses stays
    assert "shifted" not in tokens and "values" not in tokens  # what it names becomes V
    assert not any("Stable softmax" in t or "subtract" in t for t in tokens)  # docstrings, comments
    assert "int" not in tokens and "->" not in tokens  # annotations


def test_strings_compare_by_value_and_a_file_that_does_not_parse_still_tokenises():
    assert texts("x = 'a' \"b\"\n") == texts('y = "ab"\n')
    assert texts('f"{a} and {b}"') == texts("f'{c} and {d}'")
    assert texts("def broken(:\n  x = 1\n")  # no exception: names it cannot resolve become V


def test_winnowing_keeps_one_print_per_window_and_is_stable():
    hashes = [5, 3, 9, 3, 7, 1, 8, 8, 2]
    picked = sim.winnow(hashes, w=3)
    assert picked == [1, 3, 5, 8]
    for start in range(len(hashes) - 2):  # every window holds a picked position
        assert any(start <= p < start + 3 for p in picked)
    tokens = sim.normalise(ORIGINAL)
    assert sim.kgram_hashes(tokens) == sim.kgram_hashes(tokens)  # no per-process salt


def test_copies_rank_above_independent_work_and_the_stub_is_boilerplate():
    docs = [sim.fingerprint("alice", {"layers.py": ORIGINAL}), sim.fingerprint("bob", {"layers.py": COPY}),
            sim.fingerprint("carol", {"layers.py": INDEPENDENT})]
    ranked = sim.rank(docs, threshold=0.5)
    first = ranked.pairs[0]
    assert {first.a, first.b} == {"alice", "bob"} and first.score > 0.5
    assert all(p.score < first.score for p in ranked.pairs[1:])
    assert [ {p.a, p.b} for p in ranked.flagged] == [{"alice", "bob"}]
    assert ranked.compared == 3 and sum(ranked.histogram) == 3
    # the same code handed out as the stub: nothing is left to share
    stub = sim.all_kgrams([ORIGINAL])
    assert all(p.score == 0.0 for p in sim.rank(docs, boilerplate=stub).pairs if "alice" in (p.a, p.b))


def test_public_solutions_are_compared_with_submissions_not_with_each_other(tmp_path):
    (tmp_path / "blog").mkdir()
    (tmp_path / "blog" / "norm.py").write_text(ORIGINAL)
    (tmp_path / "gist.py").write_text(ORIGINAL)
    public = sim.public_docs(tmp_path)
    assert [d.name for d in public] == ["public:blog", "public:gist.py"]
    ranked = sim.rank([sim.fingerprint("bob", {"layers.py": COPY}), sim.fingerprint("carol", {"layers.py": INDEPENDENT})],
                      public=public)
    pairs = [{p.a, p.b} for p in ranked.pairs]
    assert {"public:blog", "public:gist.py"} not in pairs and ranked.compared == 5
    assert ranked.pairs[0].a == "bob" and ranked.pairs[0].b.startswith("public:")


def test_side_by_side_lines_and_round_trip():
    a, b = sim.fingerprint("alice", {"layers.py": ORIGINAL}), sim.fingerprint("bob", {"layers.py": COPY})
    lines_a, lines_b = sim.matched_lines(a, b)
    forward_a = ORIGINAL.splitlines().index("        rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)") + 1
    assert forward_a in lines_a["layers.py"] and lines_b["layers.py"]
    again = sim.Doc.from_dict(a.to_dict())
    assert again.prints == a.prints and again.files == a.files


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_sources_are_read_as_the_intake_reads_them(tmp_path):
    (tmp_path / "layers.py").write_text("x = 1\n")
    (tmp_path / "helper.py").write_text("y = 2\n")
    (tmp_path / "other.txt").write_text("z")
    (tmp_path / "linked.py").symlink_to(tmp_path / "layers.py")
    assert sim.read_sources(tmp_path) == {"helper.py": "y = 2\n", "layers.py": "x = 1\n"}
