"""Unit tests of the spec features added for the embedding catalogue.

`extends` (variants), options (constructor settings as value inputs),
`multiple_of` dims, the position-scaled tolerance, parameter-count
expressions, the dropout acceptance band and lenient loading of weights for
submodules a configuration does not build. No worker is started.
"""

from __future__ import annotations

import math
import random
import textwrap

import pytest
import torch
from hypothesis import given, settings
from torch import nn

from validator.cases import case_strategy, fixed_case
from validator.checks.dropout import dropped_fraction_bound
from validator.checks.modules import evaluate
from validator.compare import GrowingAtol, mismatch, tolerance_for
from validator.runner import execute
from validator.spec import SpecError, load_challenge

PARENT = textwrap.dedent("""\
    id: parent
    title: Parent
    entries:
      Thing: {kind: module, init: [n], call: [x], parameters: {weight: [n, n]}}
    dims: {n: [1, 4]}
    inputs:
      x: {type: float, shape: ["...", n]}
    checks:
      - {id: first, kind: values, test: values, points: 2, title: one}
      - {id: second, kind: shape, test: shape, points: 1}
      - {id: third, kind: structure, test: signature, points: 1}
    questions:
      - {id: q, type: numeric, prompt: "how many", points: 1}
""")


def write(tmp_path, name, text):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_extends_merges_checks_by_id_and_replaces_entries(tmp_path):
    write(tmp_path, "parent", PARENT)
    child = write(tmp_path, "child", """\
        id: child
        extends: parent
        title: Child
        entries:
          Other: {kind: module, init: [n], call: [x], parameters: {weight: [n, n]}}
        checks:
          - {id: first, title: changed}
          - {id: second, drop: true}
          - {id: fourth, kind: values, test: values, points: 1}
        questions: []
    """)
    ch = load_challenge(child)
    assert ch.extends == "parent" and list(ch.entries) == ["Other"]
    assert [c.id for c in ch.checks] == ["first", "third", "fourth"]
    first = ch.checks[0]
    assert first.title == "changed" and first.points == 2 and first.test == "values"
    assert ch.questions == [] and list(ch.inputs) == ["x"]


def test_extends_reports_a_missing_parent_and_a_bad_drop(tmp_path):
    child = write(tmp_path, "child", "id: child\nextends: nowhere\ntitle: c\n")
    with pytest.raises(SpecError, match="no spec nowhere.yaml"):
        load_challenge(child)
    write(tmp_path, "parent", PARENT)
    child = write(tmp_path, "child", "id: child\nextends: parent\ntitle: c\nchecks:\n  - {id: nope, drop: true}\n")
    with pytest.raises(SpecError, match="cannot drop 'nope'"):
        load_challenge(child)


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path, "a", "id: a\nextends: b\ntitle: a\n")
    b = write(tmp_path, "b", "id: b\nextends: a\ntitle: b\n")
    with pytest.raises(SpecError, match="cycle"):
        load_challenge(b)


OPTIONS = textwrap.dedent("""\
    id: opts
    title: Options
    entries:
      Layer:
        kind: module
        init: [n]
        init_kwargs: {mode: mode, pad: pad}
        call: [x]
    dims: {n: [1, 9]}
    multiple_of: {n: 2}
    inputs:
      x: {type: float, shape: ["...", n]}
      mode: {type: value, choices: [a, b, c]}
      pad: {type: value, value: n-1}
    checks:
      - {id: v, kind: values, test: values, points: 1, inputs: {mode: {value: b}}}
""")


def test_options_are_drawn_overridden_and_resolved(tmp_path):
    ch = load_challenge(write(tmp_path, "opts", OPTIONS))
    assert sorted(ch.options()) == ["mode", "pad"]
    entry = ch.entries["Layer"]
    seen = set()

    @settings(max_examples=60, database=None)
    @given(case_strategy(ch, entry))
    def drawn(case):
        assert case.dims["n"] % 2 == 0 and 2 <= case.dims["n"] <= 8
        assert case.dims["pad"] == case.dims["n"] - 1
        assert case.inputs["x"].shape[-1] == case.dims["n"]
        seen.add(case.dims["mode"])

    drawn()
    assert seen == {"a", "b", "c"}
    fixed = fixed_case(ch, entry, dims={"n": 3}, overrides={"mode": {"value": "c"}})
    assert fixed.dims["n"] == 4 and fixed.dims["mode"] == "c" and fixed.dims["pad"] == 3


def test_an_unknown_name_in_init_is_a_spec_error(tmp_path):
    bad = OPTIONS.replace("init: [n]", "init: [m]")
    with pytest.raises(SpecError, match="must name a dim .* or an option"):
        load_challenge(write(tmp_path, "opts", bad))


def test_multiple_of_needs_a_multiple_in_range(tmp_path):
    bad = OPTIONS.replace("dims: {n: [1, 9]}", "dims: {n: [3, 3]}")
    with pytest.raises(SpecError, match="no multiple of 2"):
        load_challenge(write(tmp_path, "opts", bad))


def test_growing_atol_widens_with_the_index_along_its_axis():
    atol, rtol = tolerance_for(torch.float32, {"float32": {"atol": 1e-5, "rtol": 0.0,
                                                          "atol_per_step": 1e-6, "axis": -2}})
    assert isinstance(atol, GrowingAtol) and float(atol) == 1e-5
    expected = torch.zeros(1001, 4)
    near = expected.clone()
    near[1000, 0] = 1e-3          # allowed: 1e-5 + 1000 * 1e-6
    assert mismatch(near, expected, atol=atol, rtol=rtol) is None
    near[10, 0] = 1e-3            # not allowed at position 10
    message = mismatch(near, expected, atol=atol, rtol=rtol)
    assert "index 10 along axis -2" in message
    assert tolerance_for(torch.float32, "default") == (1e-5, 1.3e-6)


def test_parameter_count_expressions():
    assert evaluate("vocab_size * embedding_dim + 2 * (max_seq_len - 1)",
                    {"vocab_size": 10, "embedding_dim": 4, "max_seq_len": 3}) == 44
    with pytest.raises(ValueError, match="only integers"):
        evaluate("vocab_size ** 2", {"vocab_size": 3})
    with pytest.raises(ValueError, match="unknown name"):
        evaluate("d_model", {"vocab_size": 3})


def test_dropout_band_holds_its_false_failure_budget():
    """Simulated correct dropout: the band's miss rate is below its nominal probability."""
    n, rate, budget = 4096, 0.3, 1e-2
    band = dropped_fraction_bound(n, rate, budget)
    gen = torch.Generator().manual_seed(0)
    fractions = (torch.rand(2000, n, generator=gen) < rate).double().mean(dim=1)
    misses = int(((fractions - rate).abs() > band).sum())
    assert misses <= 2000 * budget * 3  # expected ~ 2000 * 0.01 = 20 at most; generous for the draw
    assert dropped_fraction_bound(16384, 0.3, 1e-6) == pytest.approx(0.01757, abs=1e-4)


class _Model(nn.Module):
    def __init__(self, learned: bool):
        super().__init__()
        self.token = nn.Linear(2, 2, bias=False)
        if learned:
            self.position = nn.Linear(2, 2, bias=False)
        self.head = nn.Linear(2, 2, bias=False)
        self.head.weight = self.token.weight

    def forward(self, x):
        return self.head(self.token(x))


def test_runner_skips_weights_of_submodules_that_were_not_built_and_reports_tied_grads():
    state = {"token.weight": torch.eye(2), "position.weight": torch.ones(2, 2)}
    call = {"entry": "M", "kind": "module", "inputs": [{"value": torch.ones(1, 2)}],
            "want": ["output", "param_grads"], "init_args": [False], "init_kwargs": {},
            "state": state, "grad_output": torch.ones(1, 2), "seed": 0, "train": False}
    result = execute({"M": _Model}, call)
    assert result["ok"] and result["state_skipped"] == ["position.weight"]
    assert set(result["param_grads"]) == {"token.weight", "head.weight"}
    missing = dict(call, state={"weight": torch.eye(2)})
    assert execute({"M": _Model}, missing)["stage"] == "load"  # a top-level name is still an error
