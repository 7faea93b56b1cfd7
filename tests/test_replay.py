"""Replayed cases (validator.checks.for_all) change no verdict, only the time a passing check takes.

A check that passed once in this process replays its cases from memory for the next layer; a case
that does not pass makes the whole check run again under hypothesis, which finds and shrinks the
failure as before, or, where the settings do not shrink (a batch's), is reported as that run would
report it. Either way a broken layer graded after a correct one must get exactly the verdicts and
messages it gets with replays switched off.
"""

from __future__ import annotations

import pytest

from helpers import IMPLEMENTATIONS, ROOT, catalogue, verdicts
from validator import checks
from validator.api import grade
from validator.worker.client import Worker

CHALLENGES = ["softmax", "linear", "rope"]  # cheap ones: the default tier grades them three times


def _verdicts(path, challenges, seed=5):
    with Worker(path) as worker:
        report = grade(path, challenges=challenges, seed=seed, profile="quick", answers={}, worker=worker,
                       catalogue=catalogue())
    return verdicts(report)


@pytest.fixture(scope="module")
def remembered():
    checks._REPLAY.clear()
    first = _verdicts(ROOT / "reference" / "layers.py", CHALLENGES)
    assert checks._REPLAY, "a passing catalogue run left no cases to replay"
    return first


def test_a_correct_layer_replayed_gets_the_same_report(remembered):
    assert _verdicts(ROOT / "reference" / "layers.py", CHALLENGES) == remembered


@pytest.mark.parametrize("challenge,name", [("softmax", "no_max_subtraction.py"),
                                            pytest.param("linear", "flattens_with_view.py", marks=pytest.mark.thorough),
                                            pytest.param("rope", "pairs_by_view.py", marks=pytest.mark.thorough),
                                            pytest.param("linear", "x_matmul_w.py", marks=pytest.mark.thorough)])
def test_a_broken_layer_gets_the_same_verdicts_with_and_without_replays(remembered, monkeypatch, challenge, name):
    path = IMPLEMENTATIONS / challenge / "broken" / name
    replayed = _verdicts(path, [challenge])
    monkeypatch.setenv("VALIDATOR_NO_REPLAY", "1")
    assert _verdicts(path, [challenge]) == replayed
    assert any(status != "passed" for status, _, _ in replayed.values())


def test_forked_graders_send_their_cases_home():
    """A --watch regrade is forked from the grader that ran the first report: the cases the first
    report's forked graders remembered must be there to inherit."""
    checks._REPLAY.clear()
    path = ROOT / "reference" / "layers.py"
    with Worker(path) as worker:
        grade(path, challenges=CHALLENGES, seed=7, profile="quick", answers={}, worker=worker,
              catalogue=catalogue(), jobs=2)
    digests = {key[0] for key in checks._REPLAY}
    assert len(digests) == len(CHALLENGES), "some challenge graded in a forked grader left no cases here"


def test_no_check_body_draws_from_the_global_prngs(monkeypatch):
    """Hypothesis seeds Python's and numpy's global PRNGs around each example; a replay does not (it would cost
    ~3% of a batch). That is only the same run if no body draws from them: over the whole catalogue's replayed
    cases (official grading's, from the recorded cases), each global PRNG's state is what it was before."""
    import random

    import numpy as np

    bodies = []
    replay = checks._replay

    def watched(cases, body, **kwargs):
        def guarded(case):
            random.seed(1234)
            np.random.seed(1234)
            before = (random.getstate(), np.random.get_state()[1].tobytes())
            try:
                body(case)
            finally:
                after = (random.getstate(), np.random.get_state()[1].tobytes())
                bodies.append((getattr(body, "__qualname__", repr(body)), before == after))
        return replay(cases, guarded, **kwargs)

    monkeypatch.setattr(checks, "_replay", watched)
    checks._REPLAY.clear()
    path = ROOT / "reference" / "layers.py"
    with Worker(path) as worker:
        grade(path, seed=11, profile="batch", answers={}, worker=worker, catalogue=catalogue())
    assert len(bodies) > 300, "the recorded cases were not replayed"
    assert [name for name, same in bodies if not same] == []


BATCH_BROKEN = [("softmax", "no_max_subtraction.py"), ("rms_norm", None), ("linear", None), ("rope", None),
                ("swiglu", None)]


@pytest.mark.parametrize("challenge,name", [
    pytest.param(challenge, name, marks=() if name else (pytest.mark.thorough,)) for challenge, name in BATCH_BROKEN])
def test_without_a_shrink_phase_a_replayed_failure_is_the_hypothesis_runs_failure(monkeypatch, challenge, name):
    """A batch's settings do not shrink: a remembered case that fails is reported at once, as the hypothesis run
    would report it (the same cases in the same order, the first failing one named). Same verdicts and messages
    with replays as without, for each broken layer (the default tier one, --thorough every one of five
    challenges), and the reports really came from replays."""
    checks._REPLAY.clear()

    def graded(path):
        with Worker(path) as worker:
            return verdicts(grade(path, challenges=[challenge], seed=3, profile="batch", answers={}, worker=worker,
                                  catalogue=catalogue()))

    graded(ROOT / "reference" / "layers.py")
    reported = [0]
    real = checks._replay

    def replay(cases, body, **kwargs):
        try:
            return real(cases, body, **kwargs)
        except (checks.CheckFailed, checks.CheckErrored):
            reported[0] += 1
            raise

    monkeypatch.setattr(checks, "_replay", replay)
    names = [name] if name else sorted(p.name for p in (IMPLEMENTATIONS / challenge / "broken").glob("*.py"))
    for broken in names:
        path = IMPLEMENTATIONS / challenge / "broken" / broken
        replayed = graded(path)
        with monkeypatch.context() as no_replay:
            no_replay.setenv("VALIDATOR_NO_REPLAY", "1")
            assert graded(path) == replayed, broken
        assert any(status != "passed" for status, _, _ in replayed.values()), broken
    assert reported[0] > 0
