"""Prove a challenge is sound: the reference with the key scores full marks, the stub scores zero,
the key answers every question, and the frozen results replay to full marks.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from validator import checks
from validator.api import grade
from validator.case_store import RECORDED, section
from validator.questions import FormulaError, draw, evaluate
from validator.instructor.fixtures import RecordingReference, fingerprint
from validator.checks import live_only_tests
from validator.reference_side import (RECORD_PROFILES, RECORD_SEEDS, FixtureFile, fixture_path,
                                      versions)
from validator.results import ChallengeResult
from validator.spec.schema import Challenge
from validator.worker.client import Worker


def key_answers(key: dict[str, dict[str, Any]], challenge: Challenge) -> tuple[dict[str, Any], list[str]]:
    """The key's answers for a challenge, and what is wrong with the key."""
    mine = key.get(challenge.id) or {}
    answers, problems = {}, []
    for q in challenge.questions:
        entry = mine.get(q.id)
        if not isinstance(entry, dict) or entry.get("answer") is None:
            problems.append(f"reference/answer_key.yaml has no answer for {challenge.id}.{q.id}")
            continue
        if q.type == "choice" and str(entry["answer"]).lower() not in q.choices:
            problems.append(f"reference/answer_key.yaml: {challenge.id}.{q.id} answer {entry['answer']!r} is not "
                            f"one of the choices {', '.join(q.choices)}")
        if q.type == "numeric":  # a formula: the answer for the numbers graded without a student id
            try:
                answers[q.id] = evaluate(entry["answer"], draw(challenge.id, q, None))
            except FormulaError as exc:
                problems.append(f"reference/answer_key.yaml: {challenge.id}.{q.id}: {exc}")
            continue
        answers[q.id] = entry["answer"]
    for qid in mine:
        if qid not in {q.id for q in challenge.questions}:
            problems.append(f"reference/answer_key.yaml: {challenge.id}.{qid} answers no question of the spec")
    return answers, problems


def shortfall(result: ChallengeResult, *, allow_skipped: bool = False) -> list[str]:
    """Checks that did not get full marks (advisory checks must pass too)."""
    out = []
    for c in result.checks:
        if c.status == "passed" or (allow_skipped and c.status == "skipped"):
            continue
        first = (c.message or "").strip().splitlines()[:1]
        out.append(f"{c.id} {c.status}" + (f": {first[0][:200]}" if first else ""))
    if result.problem:
        out.insert(0, f"problem: {result.problem[:300]}")
    return out


def live_shortfall(challenge: Challenge, *, catalogue: dict[str, Challenge], reference_file: Path,
                   answers: dict[str, Any], seed: int = RECORD_SEEDS[0], profile: str = "quick") -> list[str]:
    """The quick first look before anything is recorded: what the reference with the key loses, live."""
    report = grade(reference_file, challenges=[challenge.id], seed=seed, profile=profile,
                   answers={challenge.id: answers}, catalogue=catalogue, reference_dir=reference_file.parent,
                   reference_mode="live")
    return shortfall(report.challenges[0])


@dataclass
class Recording:
    """What :func:`record` found: the fixture, what kept the reference from full marks (empty when sound),
    the cases its checks were given in the runs :data:`validator.case_store.RECORDED` names (section ->
    replay key -> cases), and the fastest of those runs in seconds."""

    fixture: FixtureFile
    problems: list[str]
    cases: dict[str, dict[tuple, list]]
    seconds: float | None


def record(challenge: Challenge, *, catalogue: dict[str, Challenge], reference_file: Path,
           answers: dict[str, Any], seeds=RECORD_SEEDS, profiles=RECORD_PROFILES) -> Recording:
    """Grade the reference as the student for every seed and profile, recording its results."""
    recorder = RecordingReference.from_file(reference_file)
    problems: list[str] = []
    cases: dict[str, dict[tuple, list]] = {}
    timed: list[float] = []
    with Worker(reference_file) as worker:
        for profile in profiles:
            for seed in seeds:
                kept = seed in RECORDED.get(profile, ())
                started = time.perf_counter()
                with checks.collecting() if kept else nullcontext({}) as given:
                    report = grade(reference_file, challenges=[challenge.id], seed=seed, profile=profile,
                                   answers={challenge.id: answers}, worker=worker, catalogue=catalogue,
                                   reference_dir=reference_file.parent, reference=recorder)
                if kept:
                    cases[section(profile, seed)] = given
                    timed.append(time.perf_counter() - started)
                lost = [x for x in shortfall(report.challenges[0])  # a missing key answer is reported once, apart
                        if not (x.startswith("question_") and x.split()[0].removeprefix("question_") not in answers)]
                if lost:
                    problems.append(f"the reference with the key lost points (seed {seed}, profile {profile}): "
                                    + "; ".join(lost))
    live_only = live_only_tests()
    fixture = FixtureFile(challenge=challenge.id,
                          fingerprint=fingerprint(challenge, reference_file=reference_file),
                          seeds=list(seeds), profiles=list(profiles),
                          deferred=[c.id for c in challenge.checks if c.test in live_only],
                          versions=versions(), results=recorder.slimmed())
    return Recording(fixture=fixture, problems=problems, cases=cases, seconds=min(timed) if timed else None)


def check_challenge(challenge: Challenge, *, catalogue: dict[str, Challenge], challenges_dir: Path,
                    reference_file: Path, stub_file: Path, answers: dict[str, Any], live: bool = True,
                    frozen: bool = True, seed: int = RECORD_SEEDS[0], profile: str = "quick") -> list[str]:
    """Grade the reference (live and replayed) and the stub; return every problem found."""
    problems: list[str] = []
    common = dict(challenges=[challenge.id], seed=seed, profile=profile, catalogue=catalogue,
                  challenges_dir=challenges_dir, reference_dir=reference_file.parent)
    if live:
        lost = live_shortfall(challenge, catalogue=catalogue, reference_file=reference_file, answers=answers,
                              seed=seed, profile=profile)
        if lost:
            problems.append("the reference with the key does not score full marks: " + "; ".join(lost))
    if frozen:
        if not fixture_path(challenges_dir, challenge.id).exists():
            problems.append("no frozen reference results: run `validator regenerate`")
        else:
            report = grade(reference_file, answers={challenge.id: answers}, reference_mode="frozen", **common)
            lost = [x for x in shortfall(report.challenges[0], allow_skipped=True) if not x.startswith("question_")]
            if lost:
                problems.append("replayed against the frozen results, the reference loses points: " + "; ".join(lost))
    problems += strength_problems(challenge, reference_file=reference_file, catalogue=catalogue)
    report = grade(stub_file, answers={}, reference_mode="live", **common)
    result = report.challenges[0]
    scored = [c for c in result.checks if c.score > 0]
    if scored:
        problems.append("the stub scores points (a check passes without any solution): "
                        + ", ".join(f"{c.id} ({c.score:g})" for c in scored))
    return problems


def strength_problems(challenge: Challenge, *, reference_file: Path,
                      catalogue: dict[str, Challenge] | None = None) -> list[str]:
    """Survivors of the last full `validator strength` run on this challenge (for the current spec, reference
    and grader) that the spec does not mark equivalent. Without such a run there is nothing to say: the
    self-check reads a summary, it never grades mutants (`validator regenerate --strength` does)."""
    from validator.instructor.strength import unmarked_survivors

    left = unmarked_survivors(challenge, reference_file=reference_file, catalogue=catalogue)
    if not left:
        return []
    shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
    return [f"`validator strength` found {len(left)} surviving mutant(s) of the reference that no check catches: "
            f"{shown}; add the check each needs (`validator strength --challenge {challenge.id}` shows them), or "
            "mark one that cannot change behaviour under `strength: equivalent:` with its reason"]
