"""Reports as the batch grader moves them around: rebuilt from JSON, or stood in for a failure."""

from __future__ import annotations

from typing import Any, Sequence

from validator.results import ChallengeResult, CheckResult, Report, figure_from_dict
from validator.spec import Challenge

_CHECK_FIELDS = ("id", "kind", "status", "score", "max_score", "message", "title", "reproduce",
                 "explanation", "answer", "duration_s", "review")


def report_from_dict(data: dict[str, Any]) -> Report:
    """The inverse of ``Report.to_dict`` (reads ``<submission>.json`` back for merge and reporters)."""
    challenges = []
    for ch in data.get("challenges", []):
        checks = [CheckResult(**{k: c[k] for k in _CHECK_FIELDS if k in c}, figures=_figures(c))
                  for c in ch.get("checks", [])]
        challenges.append(ChallengeResult(id=ch["id"], title=ch.get("title", ch["id"]), checks=checks,
                                          problem=ch.get("problem"),
                                          implementations=dict(ch.get("implementations") or {})))
    return Report(challenges=challenges, seed=int(data.get("seed", 0)), student=str(data.get("student", "")),
                  profile=str(data.get("profile", "")), duration_s=float(data.get("duration_s", 0.0)),
                  notes=list(data.get("notes", [])))


def _figures(check: dict[str, Any]) -> list:
    return [f for f in map(figure_from_dict, check.get("figures") or []) if f is not None]


def failed_report(student: str, challenges: Sequence[Challenge], problem: str, *, seed: int,
                  profile: str) -> Report:
    """A report for a submission the grader could not grade: every check errored, max scores kept."""
    results = []
    for ch in challenges:
        checks = [CheckResult(id=c.id, kind=c.kind, status="error", score=0.0, max_score=c.points,
                              title=c.title, message="not run: see the problem above") for c in ch.checks]
        checks += [CheckResult(id=q.id, kind="question", status="error", score=0.0,
                               max_score=q.points, title=q.prompt.splitlines()[0][:80] if q.prompt else q.id,
                               message="not run: see the problem above") for q in ch.questions]
        results.append(ChallengeResult(id=ch.id, title=ch.title, checks=checks, problem=problem))
    return Report(challenges=results, seed=seed, student=student, profile=profile, notes=[problem])
