"""Grading helpers for the project's own tests: grade a file, read a mutant's expectations."""

from __future__ import annotations

import ast
import os
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from validator import paths
from validator.api import grade
from validator.results import ChallengeResult
from validator.spec import load_catalogue
from validator.worker.client import Worker

ROOT = Path(__file__).resolve().parents[1]
IMPLEMENTATIONS = ROOT / "tests" / "implementations"


def seeds_for_tests() -> list[int]:
    """Seeds for 'passes on every seed' tests: one in the default tier, more with VALIDATOR_TEST_SEEDS=N
    (``--thorough`` sets 3 unless it is set, `.ci/run` 2)."""
    n = int(os.environ.get("VALIDATOR_TEST_SEEDS", "1"))
    return [1000 + 7919 * i for i in range(n)]


def grading_device() -> str | None:
    """Where the mutant library's layers run: VALIDATOR_TEST_DEVICE=cuda on a GPU machine, else as graded."""
    return os.environ.get("VALIDATOR_TEST_DEVICE") or None


@lru_cache(maxsize=None)
def catalogue():
    return load_catalogue(paths.challenges_dir())


def grade_file(path: str | Path, challenge: str, *, seeds=(0,), profile: str = "quick",
               answers=None, checks=None) -> list[ChallengeResult]:
    """Grade one file on one challenge for each seed, reusing one worker."""
    out = []
    with Worker(path) as worker:
        for seed in seeds:
            report = grade(path, challenges=[challenge], seed=seed, profile=profile, answers=answers,
                           checks=checks, worker=worker, catalogue=catalogue(), device=grading_device())
            out.append(report.challenges[0])
    return out


def verdicts(report) -> dict[tuple[str, str], tuple]:
    """(challenge, check) -> status, score and message: what two gradings of one file must agree on (a timed
    check's message carries its measured times, which differ from run to run: left out)."""
    return {(ch.id, c.id): (c.status, c.score, c.message if c.kind != "performance" else "")
            for ch in report.challenges for c in ch.checks}


def code_checks(result: ChallengeResult):
    return [c for c in result.checks if c.kind != "question"]


def variants(kind: str) -> list[tuple[str, Path]]:
    """(challenge id, file) for every correct/ or broken/ implementation in the mutant library.

    A variant is a ``.py`` file, or a folder holding a ``layers.py`` and the helper modules it imports.
    """
    found = []
    for challenge_dir in sorted(IMPLEMENTATIONS.glob("*")):
        folder = challenge_dir / kind
        paths = list(folder.glob("*.py")) + [d / "layers.py" for d in folder.glob("*") if (d / "layers.py").is_file()]
        for path in sorted(paths, key=variant_name):
            found.append((challenge_dir.name, path))
    return found


def variant_name(path: Path) -> str:
    return path.parent.name if path.name == "layers.py" else path.stem


def tiered(kind: str, *, per_challenge: int) -> list:
    """Every variant as a pytest param; all but ``per_challenge`` of each challenge (spread over the sorted
    list) are marked for the thorough tier, so the default tier grades a sample of every challenge."""
    import pytest

    by_challenge: dict[str, list[Path]] = {}
    for challenge, path in variants(kind):
        by_challenge.setdefault(challenge, []).append(path)
    params = []
    for challenge, paths in by_challenge.items():
        step = max(1, len(paths) // per_challenge)
        sample = set(paths[::step][:per_challenge])
        for path in paths:
            marks = () if path in sample else (pytest.mark.thorough,)
            params.append(pytest.param(challenge, path, marks=marks, id=f"{challenge}-{variant_name(path)}"))
    return params


def _declarations(path: Path) -> dict[str, object]:
    """Top-level constant assignments of a mutant file, read without importing it."""
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return out


def expectations(path: Path) -> tuple[list[str], list[str]]:
    """A broken variant's legacy CAUGHT_BY kinds and (optional) CAUGHT_BY_CHECKS ids."""
    found = _declarations(path)
    return list(found.get("CAUGHT_BY", [])), list(found.get("CAUGHT_BY_CHECKS", []))


def may_fail(path: Path) -> list[str] | None:
    """The check ids a mutant's one bug may cost (``MAY_FAIL``), or None for a file that predates it."""
    found = _declarations(path)
    return list(found["MAY_FAIL"]) if "MAY_FAIL" in found else None


def breaks_every_call_on_a_device(path: Path) -> bool:
    """``BREAKS_EVERY_CALL_ON_A_DEVICE = True``: the bug leaves a tensor on the CPU (state that ``.to(device)`` never
    moves, a tensor made without ``device=``), so with the layer on a GPU its first call fails. There the
    verdict asks only that a declared check is lost: the declared list is what the bug costs on the CPU."""
    return _declarations(path).get("BREAKS_EVERY_CALL_ON_A_DEVICE") is True


def expected_messages(path: Path) -> dict[str, str]:
    """``MESSAGES = {check_id: substring}``: what the report must say for those checks."""
    return dict(_declarations(path).get("MESSAGES", {}))


LOST = ("failed", "error", "skipped")


def verdict_problems(path: Path, result: ChallengeResult) -> list[str]:
    """Why a mutant's verdict breaks its declaration (empty when it holds).

    A mutant must lose at least one of its MAY_FAIL checks and no code check
    outside them; every MESSAGES substring must appear in that check's message.
    Files without MAY_FAIL fall back to CAUGHT_BY kinds (new files from other branches).
    """
    checks = code_checks(result)
    lost = {c.id: c for c in checks if c.status in LOST}
    problems: list[str] = []
    allowed = may_fail(path)
    if allowed is None:
        kinds, ids = expectations(path)
        if not kinds and not ids:
            return [f"{path.name} declares neither MAY_FAIL nor CAUGHT_BY"]
        failing = [c for c in checks if c.status in ("failed", "error", "advisory")]
        missing = [k for k in kinds if k not in {c.kind for c in failing}] + \
            [i for i in ids if i not in {c.id for c in failing}]
        if missing:
            problems.append(f"expected failing checks of kind/id {missing}")
    else:
        unknown = [i for i in allowed if i not in {c.id for c in result.checks}]
        if unknown:
            problems.append(f"MAY_FAIL names checks this challenge does not have: {unknown}")
        if not any(i in lost for i in allowed):
            problems.append(f"none of its MAY_FAIL checks {allowed} was lost")
        extra = sorted(set(lost) - set(allowed))
        if extra and grading_device() not in (None, "cpu") and breaks_every_call_on_a_device(path):
            extra = []
        if extra:
            problems.append(f"lost points on checks outside MAY_FAIL: {extra}")
    for check_id, text in expected_messages(path).items():
        c = next((c for c in result.checks if c.id == check_id), None)
        if c is None or text not in c.message:
            problems.append(f"{check_id}: expected the message to contain {text!r}, got "
                            f"{(c.message if c else 'no such check')!r}")
    for c in checks:
        if c.status in ("failed", "error") and (not c.message.strip() or "internal grader error" in c.message):
            problems.append(f"{c.id} {c.status} without a truthful message: {c.message[:200]!r}")
    return problems


def describe_failures(result: ChallengeResult) -> str:
    return "\n".join(f"  {c.id} [{c.kind}] {c.status}: {c.message[:400]}" for c in code_checks(result)
                     if c.status not in ("passed", "advisory"))


@contextmanager
def grader_sources_digested_once():
    """Keep fingerprint()'s digests of the grader's own sources while the block runs.

    fingerprint() digests about 28 grader source files for each challenge (an AST dump each, some 30 ms), so
    `regenerate.plan` over the catalogue spent about 13 s digesting the same files 16 times. The digest is
    kept per (path, mtime, size): a file that changes is digested again, so staleness is judged as before.
    """
    from validator.instructor import fixtures

    original = fixtures._code_digest
    kept: dict[tuple[str, int, int], bytes] = {}

    def digest(path: Path) -> bytes:
        st = os.stat(path)
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in kept:
            kept[key] = original(path)
        return kept[key]

    fixtures._code_digest = digest
    try:
        yield
    finally:
        fixtures._code_digest = original
