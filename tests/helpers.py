"""Grading helpers for the project's own tests: grade a file, read a mutant's expectations."""

from __future__ import annotations

import ast
import os
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
    """Seeds for 'passes on every seed' tests: a few locally, more with VALIDATOR_TEST_SEEDS=N."""
    n = int(os.environ.get("VALIDATOR_TEST_SEEDS", "2"))
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


def code_checks(result: ChallengeResult):
    return [c for c in result.checks if c.kind != "question"]


def variants(kind: str) -> list[tuple[str, Path]]:
    """(challenge id, file) for every correct/ or broken/ implementation in the mutant library."""
    found = []
    for challenge_dir in sorted(IMPLEMENTATIONS.glob("*")):
        for path in sorted((challenge_dir / kind).glob("*.py")):
            found.append((challenge_dir.name, path))
    return found


def expectations(path: Path) -> tuple[list[str], list[str]]:
    """A broken variant's CAUGHT_BY kinds and (optional) CAUGHT_BY_CHECKS ids, read without importing it."""
    tree = ast.parse(path.read_text())
    kinds, check_ids = [], []
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id == "CAUGHT_BY":
                kinds = list(ast.literal_eval(node.value))
            elif node.targets[0].id == "CAUGHT_BY_CHECKS":
                check_ids = list(ast.literal_eval(node.value))
    return kinds, check_ids


def describe_failures(result: ChallengeResult) -> str:
    return "\n".join(f"  {c.id} [{c.kind}] {c.status}: {c.message[:400]}" for c in result.checks
                     if c.status not in ("passed", "advisory", "skipped"))
