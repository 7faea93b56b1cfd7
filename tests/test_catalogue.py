"""The whole catalogue: every spec loads, the reference scores full marks, the stub scores zero.

The default tier grades the reference and the stub on ``DEFAULT_TIER`` (two
challenges, a few seconds); the thorough tier (``--thorough``) grades them over
the whole catalogue (about a minute on 2 cores), with one worker (the way
`validator submit-build` runs), and once more on a single challenge; both wall
times are recorded (``record_property`` and the terminal summary), not
asserted: the machine's load decides them. What is asserted is the
structure of the time: no challenge is charged for another's setup, so the
whole run is about the sum of its challenges plus one start-up.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from helpers import ROOT, catalogue, code_checks, describe_failures, seeds_for_tests
from validator import paths
from validator.api import grade
from validator.spec import load_challenge
from validator.worker.client import Worker

REFERENCE = ROOT / "reference" / "layers.py"
STUB = ROOT / "student" / "layers.py"
SINGLE = "token_embedding"
DEFAULT_TIER = (SINGLE, "softmax")  # graded in the default tier; --thorough grades every challenge
TIMINGS: dict[str, float] = {}


def tiered_challenges() -> list:
    """Every challenge as a param; those outside DEFAULT_TIER are marked for the thorough tier."""
    return [pytest.param(c, marks=() if c in DEFAULT_TIER else (pytest.mark.thorough,)) for c in sorted(catalogue())]


def graded_challenges(config) -> list[str] | None:
    """What the module's fixtures grade: the whole catalogue (None) with --thorough, else DEFAULT_TIER."""
    return None if config.getoption("--thorough") else list(DEFAULT_TIER)


def _key_answers() -> dict[str, dict]:
    """Answers taken from the answer key (when the key is there), so questions count too; a question drawn per
    student has a formula there, which load_answers marks to be evaluated for the numbers graded."""
    from validator.questions import load_answers

    return load_answers(ROOT / "reference" / "answer_key.yaml")


def _grade(path: Path, challenges=None, answers=None):
    started = time.perf_counter()
    with Worker(path) as worker:
        report = grade(path, challenges=challenges, seed=seeds_for_tests()[0], profile="quick",
                       answers=answers or {}, worker=worker, catalogue=catalogue(), reference_mode="live")
    return report, time.perf_counter() - started


@pytest.fixture(scope="module")
def reference_report(request):
    report, seconds = _grade(REFERENCE, challenges=graded_challenges(request.config), answers=_key_answers())
    TIMINGS["whole catalogue"] = seconds
    for res in report.challenges:
        TIMINGS[res.id] = sum(c.duration_s for c in res.checks)
    return report


@pytest.fixture(scope="module")
def stub_report(request):
    report, _ = _grade(STUB, challenges=graded_challenges(request.config))
    return report


def spec_paths() -> list[Path]:
    return sorted(paths.challenges_dir().glob("*.yaml"))


@pytest.mark.parametrize("path", spec_paths(), ids=lambda p: p.stem)
def test_spec_loads_and_is_complete(path):
    ch = load_challenge(path)
    assert ch.checks, f"{path.name} has no checks"
    assert ch.contract.strip() and ch.summary.strip(), f"{path.name} needs a summary and a contract"
    assert sum(c.points for c in ch.checks) > 0
    assert ch.extends or ch.questions, f"{path.name} has no conceptual questions"


def test_catalogue_ids_are_the_file_names():
    assert sorted(catalogue()) == sorted(p.stem for p in spec_paths())


@pytest.mark.parametrize("challenge", tiered_challenges())
def test_reference_scores_full_marks(reference_report, challenge):
    (res,) = [r for r in reference_report.challenges if r.id == challenge]
    assert res.problem is None, res.problem
    lost = [c for c in code_checks(res) if c.status not in ("passed", "advisory") or c.score != c.max_score]
    assert not lost, f"the reference loses points on {challenge}:\n{describe_failures(res)}"
    keyed = _key_answers().get(challenge, {})
    for q in (c for c in res.checks if c.kind == "question"):
        if q.id.removeprefix("question_") in keyed:
            assert q.status == "passed", f"{challenge}: the key's answer to {q.id} is graded wrong: {q.message}"


@pytest.mark.parametrize("challenge", tiered_challenges())
def test_stub_scores_zero(stub_report, challenge):
    (res,) = [r for r in stub_report.challenges if r.id == challenge]
    scored = [c for c in code_checks(res) if c.score > 0]
    assert not scored, f"the stub scores on {challenge}: " + ", ".join(c.id for c in scored)


@pytest.mark.thorough
def test_whole_catalogue_time_is_measured(reference_report, record_property):
    """Whole catalogue vs one challenge, both from a cold start: measured and recorded, not asserted."""
    _, single = _grade(REFERENCE, challenges=[SINGLE], answers=_key_answers())
    whole = TIMINGS["whole catalogue"]
    n = len(reference_report.challenges)
    record_property("catalogue_seconds", round(whole, 2))
    record_property("single_challenge_seconds", round(single, 2))
    record_property("challenges", n)
    per_challenge = {r.id: round(TIMINGS[r.id], 2) for r in reference_report.challenges}
    print(f"\nreference, profile quick: whole catalogue ({n} challenges) {whole:.1f} s, "
          f"{SINGLE} alone {single:.1f} s, ratio {whole / single:.1f}; checks per challenge: {per_challenge}")
    # the structure, not the clock: the time is spent in checks, not in per-challenge set-up
    in_checks = sum(TIMINGS[r.id] for r in reference_report.challenges)
    assert in_checks <= whole
