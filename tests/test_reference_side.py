"""The reference side is one interface the engine owns: live, recording and frozen, chosen once per run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from validator import checks
from validator.instructor.fixtures import RecordingReference
from validator.checks import live_only_tests
from validator.reference_side import DEFERRED, FixtureFile, FrozenReference, LiveReference

ROOT = Path(__file__).resolve().parents[1]


def _double(x):
    return x * 2


CALL = {"entry": "double", "kind": "function", "inputs": [{"value": torch.ones(2), "requires_grad": False}],
        "want": ["output"], "seed": None, "init_args": [], "init_kwargs": {}, "default_dtype": None,
        "grad_output": None, "train": None, "state": None}


def test_the_three_sides_answer_the_same_call_the_same_way():
    live = LiveReference({"double": _double})
    recording = RecordingReference({"double": _double})
    expected = live.call("c", CALL)["output"]
    assert recording.before_check(checks.get("values")) is None
    assert torch.equal(recording.call("c", CALL)["output"], expected)
    assert recording.after_check("passed", "") == ("passed", "")
    frozen = FrozenReference({"c": FixtureFile("c", "f", [1], ["quick"], [], {}, recording.slimmed())})
    assert frozen.before_check(checks.get("values")) is None
    assert torch.equal(frozen.call("c", CALL)["output"], expected)
    assert frozen.after_check("passed", "") == ("passed", "")


def test_a_check_that_times_the_reference_is_deferred_by_a_frozen_side_and_not_recorded():
    assert "time_ratio" in live_only_tests() and "values" not in live_only_tests()
    timing = checks.get("time_ratio")
    assert LiveReference({}).before_check(timing) is None
    frozen = FrozenReference({})
    assert DEFERRED in frozen.before_check(timing)
    recording = RecordingReference({"double": _double})
    recording.before_check(timing)
    recording.call("c", CALL)
    recording.after_check("passed", "")
    assert recording.results == {}


def test_a_frozen_check_that_compared_nothing_is_deferred_not_passed():
    frozen = FrozenReference({"c": FixtureFile("c", "f", [1], ["quick"], [], {}, {})})
    frozen.before_check(checks.get("values"))
    try:
        frozen.call("c", CALL)
    except Exception:  # noqa: BLE001 - outside a search a miss raises ReferenceUnavailable
        pass
    status, message = frozen.after_check("passed", "")
    assert status == "skipped" and DEFERRED in message


def test_grading_never_imports_the_instructor_tools():
    """The arrow points one way: instructor tools use the engine, the engine (a handout's grader) never them."""
    script = ("import sys, validator.api, validator.grading, validator.reference_side, validator.checks as c; "
              "c._load_all(); print(sorted(m for m in sys.modules if m.startswith('validator.instructor')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_a_recording_keeps_grading_in_this_process_whatever_jobs_asks():
    """Forked graders would record into their own copies of the recording, lost when they exit."""
    from helpers import catalogue

    from validator.api import grade

    reference = ROOT / "reference" / "layers.py"
    wanted = ["softmax", "embedding_functional"]
    recordings = []
    for jobs in (1, 2):
        recorder = RecordingReference.from_file(reference)
        grade(reference, challenges=wanted, seed=11, profile="quick", catalogue=catalogue(), reference=recorder,
              reference_dir=reference.parent, jobs=jobs)
        recordings.append(set(recorder.results))
    assert recordings[0] and recordings[1] == recordings[0]


def test_a_handout_decodes_each_fixture_once_and_again_only_once_it_changes(tmp_path, monkeypatch):
    """A handout's run asks for its fixtures twice (its seeds, then its results); decoding is the cost."""
    from validator import reference_side

    path = reference_side.fixture_path(tmp_path, "c")
    path.parent.mkdir()
    path.write_bytes(FixtureFile("c", "f", [1], ["quick"], [], {}, {}).to_bytes())
    reads = []
    real = FixtureFile.read.__func__
    monkeypatch.setattr(FixtureFile, "read", classmethod(lambda cls, p: reads.append(p) or real(cls, p)))
    assert FrozenReference.load(tmp_path, ["c"]).seeds(["c"]) == [1]
    assert FrozenReference.load(tmp_path, ["c"]).seeds(["c"]) == [1]
    assert len(reads) == 1
    path.write_bytes(FixtureFile("c", "f", [1, 2, 3], ["quick"], [], {}, {}).to_bytes())
    assert FrozenReference.load(tmp_path, ["c"]).seeds(["c"]) == [1, 2, 3]
    assert len(reads) == 2


def test_a_remembering_side_runs_each_call_once_and_hands_out_copies():
    """A batch slot asks the same questions for every submission: the second asking is answered from memory,
    with tensors of its own (a check that changed them would change the next submission's expected values)."""
    from validator.reference_side import RememberingReference

    runs = []

    def counted(x):
        runs.append(1)
        return x * 2

    side = RememberingReference(LiveReference({"double": counted}))
    assert side.before_check(checks.get("values")) is None
    first = side.call("c", CALL)
    first["output"].add_(100)  # what a careless check might do
    again = side.call("c", CALL)
    assert len(runs) == 1 and torch.equal(again["output"], torch.full((2,), 2.0))
    other = dict(CALL, inputs=[{"value": torch.full((2,), 3.0), "requires_grad": False}])
    assert torch.equal(side.call("c", other)["output"], torch.full((2,), 6.0)) and len(runs) == 2
    assert side.call("another challenge", CALL) and len(runs) == 3  # the challenge is part of the key
    (timing,) = [name for name in live_only_tests()]
    side.before_check(checks.get(timing))  # the speed check measures the reference itself: its timed runs run
    timed = dict(CALL, repeat=1)  # a timed run, however many passes
    side.call("c", timed)
    side.call("c", timed)
    assert len(runs) == 5
    side.call("c", CALL)  # the same check's value comparisons are remembered like any other
    assert len(runs) == 5
    side.before_check(checks.get("values"))
    side.call("c", CALL)
    assert len(runs) == 5 and (side.hits, side.misses) == (3, 3)


def test_a_remembering_side_starts_over_when_full():
    from validator.reference_side import RememberingReference

    side = RememberingReference(LiveReference({"double": _double}), max_entries=2)
    side.before_check(checks.get("values"))
    for k in range(5):
        side.call("c", dict(CALL, inputs=[{"value": torch.full((2,), float(k)), "requires_grad": False}]))
    assert len(side.known) <= 2


def test_a_handout_explains_a_failure_as_official_grading_does():
    """A values check's `explain` asks the reference about a changed case only where the student fails; the
    recording asks for every case, so a handout (frozen results only) names the cause too, on RoPE that ignores
    the positions it is given. (The failing inputs shown may differ: a handout shrinks over recorded cases only.)"""
    from validator.api import grade

    path = ROOT / "tests" / "implementations" / "rope" / "broken" / "positions_ignored.py"
    said = {}
    for mode in ("live", "frozen"):
        report = grade(path, challenges=["rope"], checks=["matches_reference", "batched_positions"], seed=23,
                       profile="quick", reference_mode=mode)
        said[mode] = {c.id: (c.status, c.message) for c in report.challenges[0].checks}
    for mode in said:
        for status, message in said[mode].values():
            assert status == "failed" and "the token_positions passed in are ignored" in message, (mode, message)
