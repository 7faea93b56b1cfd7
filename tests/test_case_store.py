"""Recorded cases (validator.case_store): a fresh grader replays what regenerate recorded, and nothing changes
but the time a passing check takes.

The cases come back from the file exactly as drawn (or are left to be drawn again); a grader with the file
draws nothing for a check the layer passes; a broken layer gets the verdicts and messages it gets with no
replay at all; a file stamped by other code is ignored, and `regenerate --check` calls it stale.
"""

from __future__ import annotations

import shutil

import pytest
import torch

from helpers import IMPLEMENTATIONS, ROOT, catalogue
from validator import case_store, checks
from validator.api import grade
from validator.cases import Case
from validator.reference_side import OFFICIAL_SEED
from validator.worker.client import Worker

CHALLENGE = "softmax"


def _sequence() -> Case:
    first = Case(dims={"d": 3}, inputs={"x": torch.randn(2, 3)}, seed=1, notes=["a note"])
    later = Case(dims={"d": 4}, inputs={"x": torch.randn(4, dtype=torch.float64)}, seed=2)
    first.steps = [first, later]
    return first


def test_cases_come_back_exactly_or_are_left_to_be_drawn(tmp_path):
    odd = torch.tensor([float("nan"), 1.0, -0.0]).to(torch.bfloat16)
    viewed = Case(dims={}, inputs={"x": torch.randn(4, 4)}, seed=3)
    viewed.layouts = {"x": {"kind": "transposed", "axis": -1}}
    viewed.extra = 7
    entries = {
        ("a", "plain", "None", 1, 3, ("generate",), True, "torch.float32"): [
            Case(dims={"n": 2}, inputs={"ids": torch.tensor([[1, 2]]), "mask": torch.tensor([True, False]),
                                        "x": odd, "eps": 1e-5, "dtype": torch.float16, "none": None}, seed=5)],
        ("a", "views", "'regime'", 2, 3, ("generate",), True, "torch.float32"): [viewed],
        ("a", "sequence", "None", 3, 3, ("generate",), True, "torch.float32"): [_sequence()],
        ("a", "tuple", "None", 4, 3, ("generate",), True, "torch.float32"): [
            Case(dims={}, inputs={"shape": (2, 3)}, seed=6)],  # the wire format has no tuples
        ("a", "strided", "None", 5, 3, ("generate",), True, "torch.float32"): [
            Case(dims={}, inputs={"x": torch.randn(3, 4).t()}, seed=7)],  # nor strides
    }
    blob, left_out = case_store.to_bytes({"default-11": entries, "batch-11": {}})
    assert sorted(key[1] for key in left_out) == ["strided", "tuple"]
    path = tmp_path / "c.cases"
    path.write_bytes(blob)
    assert case_store.read(path, "batch-11") == {} and case_store.read(path, "default-23") is None
    assert "a note" in case_store.strings(path)
    back = case_store.read(path, "default-11")
    assert sorted(back) == sorted(k for k in entries if k not in left_out)
    for key, cases in back.items():
        assert all(case_store.same(a, b) for a, b in zip(entries[key], cases)), key
    sequence = back[("a", "sequence", "None", 3, 3, ("generate",), True, "torch.float32")][0]
    assert sequence.steps[0] is sequence and len(sequence.steps) == 2


def test_a_file_stamped_by_other_code_is_ignored(tmp_path, monkeypatch):
    blob, _ = case_store.to_bytes({"quick-5": {("a", "c", "None", 1, 3, ("generate",), True, "f32"): [
        Case(dims={}, inputs={"x": torch.ones(2)}, seed=1)]}})
    path = tmp_path / "c.cases"
    path.write_bytes(blob)
    assert case_store.read(path, "quick-5")
    monkeypatch.setattr(case_store, "stamp", lambda: {"format": "1", "code": "other"})
    assert case_store.read(path, "quick-5") is None
    path.write_bytes(b"not a cases file")
    assert case_store.read(path, "quick-5") is None and case_store.read_stamp(path) is None


def test_a_replayed_sequence_is_copied_call_by_call():
    """A layer that writes into its inputs must not change what the next layer is given."""
    case = _sequence()
    fresh = checks._fresh(case)
    fresh.steps[1].inputs["x"].add_(1.0)
    fresh.inputs["x"].add_(1.0)
    assert fresh.steps[0] is fresh
    assert not torch.equal(fresh.steps[1].inputs["x"], case.steps[1].inputs["x"])
    assert not torch.equal(fresh.inputs["x"], case.inputs["x"])


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A challenges folder whose softmax cases were recorded as regenerate records them."""
    folder = tmp_path_factory.mktemp("challenges")
    shutil.copy(ROOT / "challenges" / f"{CHALLENGE}.yaml", folder)
    checks._REPLAY.clear()
    path = ROOT / "reference" / "layers.py"
    with checks.collecting() as given, Worker(path) as worker:
        grade(path, challenges=[CHALLENGE], seed=OFFICIAL_SEED, profile="quick", answers={}, worker=worker,
              catalogue=catalogue())
    blob, left_out = case_store.to_bytes({case_store.section("quick", OFFICIAL_SEED): given})
    assert given and not left_out
    (folder / "fixtures").mkdir()
    case_store.cases_path(folder, CHALLENGE).write_bytes(blob)
    return folder


def _verdicts(path, folder, monkeypatch, *, draws: list):
    """Grade as a fresh process would (nothing remembered, nothing loaded), counting hypothesis's searches."""
    checks._REPLAY.clear()
    case_store._LOADED.clear()
    given = checks.given
    monkeypatch.setattr(checks, "given", lambda *a, **k: (draws.append(1), given(*a, **k))[1])
    with Worker(path) as worker:
        report = grade(path, challenges=[CHALLENGE], seed=OFFICIAL_SEED, profile="quick", answers={},
                       worker=worker, catalogue=catalogue(), challenges_dir=folder)
    monkeypatch.setattr(checks, "given", given)
    return {c.id: (c.status, c.score, c.message if c.kind != "performance" else "")
            for ch in report.challenges for c in ch.checks if c.kind != "question"}


def test_a_fresh_grader_replays_the_recorded_cases_and_searches_nothing(recorded, monkeypatch):
    path = ROOT / "reference" / "layers.py"
    draws: list = []
    replayed = _verdicts(path, recorded, monkeypatch, draws=draws)
    assert draws == [], f"{len(draws)} checks searched again with their cases recorded"
    assert {status for status, _, _ in replayed.values()} == {"passed"}, {k: v for k, v in replayed.items() if v[0] != "passed"}
    monkeypatch.setenv("VALIDATOR_NO_REPLAY", "1")
    drawn: list = []
    assert _verdicts(path, recorded, monkeypatch, draws=drawn) == replayed
    assert drawn, "with replays off, the checks search as before"


def test_a_broken_layer_gets_the_same_verdicts_with_recorded_cases(recorded, monkeypatch):
    path = IMPLEMENTATIONS / CHALLENGE / "broken" / "no_max_subtraction.py"
    replayed = _verdicts(path, recorded, monkeypatch, draws=[])
    monkeypatch.setenv("VALIDATOR_NO_REPLAY", "1")
    assert _verdicts(path, recorded, monkeypatch, draws=[]) == replayed
    assert any(status != "passed" for status, _, _ in replayed.values())
