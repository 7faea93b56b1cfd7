"""The terminal report's headline says where the points went: earned, deferred, unanswered, lost."""

from __future__ import annotations

import io

from rich.console import Console

from validator.reporters.terminal import breakdown, render_summary
from validator.results import ChallengeResult, CheckResult, Report


def report(*checks: CheckResult) -> Report:
    return Report(challenges=[ChallengeResult(id="c", title="C", checks=list(checks))], seed=1, student="s",
                  profile="quick")


def check(status: str, score: float, max_score: float, message: str = "", kind: str = "values") -> CheckResult:
    return CheckResult(id=f"x{id(message)}", kind=kind, status=status, score=score, max_score=max_score,
                       message=message)


def headline(rep: Report) -> str:
    out = io.StringIO()
    render_summary(Console(file=out, width=200, color_system=None), rep)
    return out.getvalue()


def test_correct_handout_run_reads_as_a_pass():
    rep = report(check("passed", 3, 3), check("skipped", 0, 1, "deferred to official grading: speed"),
                 check("skipped", 0, 1, "recorded (format valid); graded at official submission", "question"),
                 check("skipped", 0, 1, "not answered", "question"))
    assert breakdown(rep) == {"earned": 3, "deferred": 2, "unanswered": 1, "lost": 0, "max": 6}
    text = headline(rep)
    assert "total 3/6" in text and "fell short" not in text
    assert "2 deferred to official grading" in text and "1 unanswered" in text and "lost" not in text


def test_a_lost_point_is_named_as_lost():
    rep = report(check("failed", 0, 2, "wrong values"), check("skipped", 0, 1, "deferred to official grading"))
    text = headline(rep)
    assert "some checks fell short" in text and "2 lost" in text and "1 deferred" in text


def test_everything_passed():
    assert "all checks passed" in headline(report(check("passed", 1, 1)))
