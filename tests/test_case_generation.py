"""Generated cases depend on the seed alone, not on which source files happen to be imported.

Hypothesis mixes literals from "local" modules into generation. Without the guard in
validator/profiles.py, importing the reference (live grading) or a file full of constants
changed the inputs a seed produced, so a handout replayed other cases than were recorded.
The default tier imports a file of constants; --thorough also imports the reference.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys
    if len(sys.argv) > 1:  # import a local source file: its literals would bias hypothesis
        import importlib.util
        spec = importlib.util.spec_from_file_location("local_source", sys.argv[1])
        module = importlib.util.module_from_spec(spec)
        sys.modules["local_source"] = module
        spec.loader.exec_module(module)
    from hypothesis import given, seed, settings
    from validator import paths, profiles
    from validator.cases import case_strategy
    from validator.spec import load_catalogue

    challenge = load_catalogue(paths.challenges_dir())["learned_positional_embedding"]
    entry = challenge.entries["LearnedPositionalEmbedding"]
    seen = []

    @seed(11)
    @settings(profiles.get_settings("default"), max_examples=200, phases=[profiles.Phase.generate])
    @given(case_strategy(challenge, entry))
    def collect(case):
        values = {k: v.double().sum().item() if hasattr(v, "double") else v for k, v in case.inputs.items()}
        seen.append([case.summary(), case.seed, values])

    collect()
    print(json.dumps(seen))
""")


def _cases(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain():
    """The cases of a process that imports no local source (a fresh interpreter, about 6 s), shared by both tests."""
    cases = _cases()
    assert len(cases) >= 20
    return cases


def test_imported_local_constants_do_not_change_generated_cases(plain, tmp_path):
    numbers = ", ".join(str(n) for n in range(100_003, 2**31 - 1, 21_474_799))  # fit a case's seed range
    (tmp_path / "constants_galore.py").write_text(f"LIMITS = [{numbers}]\nSCALE = 0.02\n")
    assert _cases(str(tmp_path / "constants_galore.py")) == plain


@pytest.mark.thorough
def test_importing_the_reference_does_not_change_generated_cases(plain):
    assert _cases(str(ROOT / "reference" / "layers.py")) == plain  # live grading imports the reference


# -- views among the inputs (input_views) ------------------------------------------------------------
def test_a_strided_layout_refuses_every_view_that_merges_axes_and_keeps_the_values():
    import torch

    from validator.runner import as_layout

    for shape in [(2, 2, 3), (2, 3, 4, 5), (4, 2, 2)]:
        value = torch.randn(shape)
        view = as_layout(value, {"kind": "strided"}, requires_grad=True)
        assert torch.equal(view.detach(), value) and not view.is_contiguous()
        for merge in [(-1, shape[-1]), (shape[0] * shape[1], *shape[2:])]:
            try:
                view.view(*merge)
            except RuntimeError:
                continue
            raise AssertionError(f"{shape}: .view{merge} of a strided layout worked")
        view.sum().backward()  # the storage is the leaf that requires grad
        assert view.is_leaf is False


def test_input_views_draws_two_leading_dims_of_two_or_more_where_the_spec_allows():
    """x.view(-1, d) works on any layout of a 1-d or 2-d x: input_views needs axes to merge."""
    from hypothesis import given, settings

    from validator import paths
    from validator.cases import case_strategy
    from validator.checks.inputs import _roomy
    from validator.spec import load_catalogue

    challenge = load_catalogue(paths.challenges_dir())["linear"]
    entry = challenge.entries["Linear"]
    leads = []

    @settings(max_examples=30, database=None)
    @given(case_strategy(challenge, entry, _roomy(challenge, entry, {})))
    def collect(case):
        leads.append(tuple(case.inputs["x"].shape[:-1]))

    collect()
    assert leads and all(len(lead) >= 2 and min(lead) >= 2 for lead in leads), leads
    assert _roomy(challenge, entry, {"x": {"max_leading_dims": 1}})["x"]["min_leading_dims"] == 1


_BACKWARD_RAISES = '''
import math
import torch
from torch import nn


class _Raises(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        return x @ w.T

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("no backward here")


class Linear(nn.Module):
    def __init__(self, in_features, out_features, device=None, dtype=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features, device=device, dtype=dtype))
        std = math.sqrt(2.0 / (in_features + out_features))
        nn.init.trunc_normal_(self.weight, std=std, a=-3 * std, b=3 * std)

    def forward(self, x):
        return _Raises.apply(x.reshape(-1, x.shape[-1]), self.weight).reshape(*x.shape[:-1], -1)
'''


def test_input_views_asks_for_the_contiguous_backward_only_where_a_call_with_views_fails(tmp_path, monkeypatch):
    """A layer that passes costs three calls a case (contiguous, drawn views, all strided): the contiguous
    backward, which only tells whose failure a failed call with views is, is not run for it. A layer whose
    backward fails on contiguous inputs too is not failed by the views check (the gradient checks own that)."""
    import re

    from helpers import grade_file

    from validator import grading
    from validator.context import Context

    calls, checking = [], []
    original, run_check = Context.student, grading.run_check

    def student(self, call, *args, **kwargs):
        if checking:  # the check's own calls, not the grading's set-up (matching the parameters)
            calls.append(call)
        return original(self, call, *args, **kwargs)

    def in_check(*args, **kwargs):
        checking.append(True)
        try:
            return run_check(*args, **kwargs)
        finally:
            checking.pop()

    monkeypatch.setattr(Context, "student", student)
    monkeypatch.setattr(grading, "run_check", in_check)
    reference = ROOT / "reference" / "layers.py"
    (result,) = grade_file(reference, "linear", profile="batch", checks=["input_views"])
    (check,) = [c for c in result.checks if c.kind != "question"]
    assert check.status == "passed", check.message
    cases = int(re.match(r"(\d+) generated calls", check.message).group(1))
    assert cases >= 1 and len(calls) == 3 * cases, (cases, len(calls))

    broken = tmp_path / "layers.py"
    broken.write_text(_BACKWARD_RAISES)
    calls.clear()
    (result,) = grade_file(broken, "linear", profile="batch", checks=["input_views"])
    (check,) = [c for c in result.checks if c.kind != "question"]
    assert check.status != "failed", check.message
    assert any(c.get("grad_output") is not None and not any(i.get("layout") for i in c["inputs"]) for c in calls)


@pytest.mark.parametrize("cid, check_id, entry_name, left_out, kept", [
    ("softmax", "bf16_accuracy", "softmax", {"rows", "cols"}, {"n"}),  # x is [8, 16, n], not [rows, cols, n]
    ("attention", "causal", None, {"keys"}, {"queries"}),  # K and V take the queries' length
])
def test_a_failing_input_names_only_the_dims_its_inputs_have(cid, check_id, entry_name, left_out, kept):
    """A check whose own shapes leave out dims the inputs would use still draws them (a constructor or a
    relation may read them) but does not show them: "rows=1, cols=1" beside an x of shape (8, 16, 32) sent
    every student who failed bf16_accuracy looking for a size their input never had."""
    from hypothesis import find

    from validator import paths
    from validator.cases import case_strategy
    from validator.spec import load_catalogue

    challenge = load_catalogue(paths.challenges_dir())[cid]
    check = next(c for c in challenge.checks if c.id == check_id)
    entry = challenge.entries[entry_name or check.entry or next(iter(challenge.entries))]
    case = find(case_strategy(challenge, entry, check.inputs), lambda c: True)
    shown = case.summary().split(";")[0]
    assert set(case.dims) >= left_out | kept  # drawn all the same
    assert all(f"{d}=" not in shown for d in left_out) and all(f"{d}=" in shown for d in kept), shown
    again = case.but(inputs=dict(case.inputs))  # a check's derived case keeps what it hides
    assert again.summary() == case.summary()
