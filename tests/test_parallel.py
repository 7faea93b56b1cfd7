"""Challenges graded in forked graders: same verdicts, catalogue order, and no challenge lost to a dead child."""

from __future__ import annotations

import os

from helpers import IMPLEMENTATIONS, catalogue

from validator.api import grade
from validator.parallel import grade_all
from validator.results import ChallengeResult


class _FakeWorker:
    def sibling(self):
        return self

    def close(self):
        pass


def test_results_arrive_in_order_and_come_from_several_processes():
    parent = os.getpid()
    seen = []
    results = grade_all(list("abcde"), worker=_FakeWorker(), jobs=3,
                        grade_one=lambda ch, w: ChallengeResult(id=ch, title=str(os.getpid())),
                        on_challenge=lambda r: seen.append(r.id))
    assert [r.id for r in results] == seen == list("abcde")
    assert len({r.title for r in results}) == 3 and str(parent) in {r.title for r in results}


def test_a_dead_grader_leaves_its_challenges_to_the_parent():
    parent = os.getpid()

    def grade_one(ch, worker):
        if os.getpid() != parent and ch == "b":
            os._exit(7)  # a grader process that dies mid-run
        return ChallengeResult(id=ch, title=str(os.getpid()))

    results = grade_all(list("abcd"), worker=_FakeWorker(), jobs=2, grade_one=grade_one)
    assert [r.id for r in results] == list("abcd")
    assert next(r for r in results if r.id == "b").title == str(parent)


def test_parallel_grading_gives_the_same_verdicts_as_serial():
    broken = IMPLEMENTATIONS / "token_embedding" / "broken" / "ids_clamped.py"
    wanted = ["token_embedding", "embedding_functional", "token_embedding_xavier"]

    def verdicts(jobs):
        report = grade(broken, challenges=wanted, seed=3, profile="quick", catalogue=catalogue(), jobs=jobs)
        return [(ch.id, [(c.id, c.status, c.score) for c in ch.checks if c.id != "speed"]) for ch in report.challenges]

    serial, parallel = verdicts(1), verdicts(2)
    assert [ch for ch, _ in parallel] == wanted
    assert parallel == serial
    assert any(status == "failed" for _, checks in serial for _, status, _ in checks)


def test_the_costliest_challenge_is_started_first_and_the_report_keeps_catalogue_order():
    """A child grader starts with the challenge with the most checks, so no large one is left for last; the
    parent takes the rest in catalogue order, and every challenge is graded once."""
    from types import SimpleNamespace

    parent = os.getpid()
    sizes = {"a": 2, "b": 3, "c": 9, "d": 1}
    selected = [SimpleNamespace(id=cid, checks=[None] * n) for cid, n in sizes.items()]
    seen = []
    results = grade_all(selected, worker=_FakeWorker(), jobs=2,
                        grade_one=lambda ch, w: ChallengeResult(id=ch.id, title=str(os.getpid())),
                        on_challenge=lambda r: seen.append(r.id))
    assert [r.id for r in results] == seen == list("abcd")
    by = {r.id: r.title for r in results}
    assert by["c"] != str(parent) and by["a"] == str(parent)


def test_recorded_costs_outrank_check_counts():
    """A challenge with few checks may still be the slowest (a transformer block): given the times that
    regenerate recorded, a child starts with the longest one, not with the one with the most checks."""
    from types import SimpleNamespace

    parent = os.getpid()
    sizes = {"a": 2, "b": 3, "c": 9, "d": 1}
    selected = [SimpleNamespace(id=cid, checks=[None] * n) for cid, n in sizes.items()]
    results = grade_all(selected, worker=_FakeWorker(), jobs=2, costs=[0.1, 0.2, 0.5, 2.0],
                        grade_one=lambda ch, w: ChallengeResult(id=ch.id, title=str(os.getpid())))
    by = {r.id: r.title for r in results}
    assert by["d"] != str(parent) and by["a"] == str(parent)


def test_recorded_grading_times_reach_the_split():
    """regenerate records how long each challenge took; every challenge of the catalogue has one."""
    from helpers import ROOT
    from validator import case_store

    times = {cid: case_store.seconds(ROOT / "challenges", cid) for cid in catalogue()}
    assert all(t is not None and t > 0 for t in times.values()), times


def test_a_child_keeps_grading_while_the_parent_is_busy_with_a_long_challenge():
    """A child's result is often larger than a pipe holds (it carries the cases it remembers): it must
    not sit on a blocked write until the parent is done with its own challenge (a whole-catalogue run
    took 21 s instead of 15). Nor may the parent start a thread to read it: a worker the parent starts
    lazily is forked only from a process with one thread (a `--watch` regrade went from 1.2 to 4 s)."""
    import select
    import threading
    from types import SimpleNamespace

    parent = os.getpid()
    signal_r, signal_w = os.pipe()
    sizes = {"a": 1, "b": 9, "c": 8}
    selected = [SimpleNamespace(id=cid, checks=[None] * n) for cid, n in sizes.items()]
    waited = {}

    def grade_one(ch, worker):
        if os.getpid() != parent:
            if ch.id == "c":
                os.write(signal_w, b"c")  # the child got to its second challenge
            return ChallengeResult(id=ch.id, title="x" * (4 << 20))  # far more than a pipe buffer
        if ch.id == "a":  # the parent's own long challenge: it ends once the child has moved on
            waited["a"] = bool(select.select([signal_r], [], [], 30)[0])
            waited["threads"] = threading.active_count()
        return ChallengeResult(id=ch.id, title=str(os.getpid()))

    try:
        results = grade_all(selected, worker=_FakeWorker(), jobs=2, grade_one=grade_one)
    finally:
        os.close(signal_r)
        os.close(signal_w)
    assert [r.id for r in results] == ["a", "b", "c"]
    assert waited == {"a": True, "threads": 1}, "the child sat blocked, or the parent started a thread"
    assert len(results[1].title) == 4 << 20
