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


def test_an_init_failure_shows_its_histogram():
    """'std 0.02 instead of 1' is visible at a glance: every value in the two middle bins."""
    from helpers import IMPLEMENTATIONS, grade_file

    from validator.reporters.terminal import render_challenge

    (result,) = grade_file(IMPLEMENTATIONS / "token_embedding" / "broken" / "init_std_002.py", "token_embedding",
                           seeds=[3], checks={"init_distribution"})
    out = io.StringIO()
    render_challenge(Console(file=out, width=200, color_system=None), result)
    text = out.getvalue()
    assert "histogram: # your values, | expected" in text
    rows = [line for line in text.splitlines() if line.rstrip().endswith("%") and ("#" in line or "|" in line)]
    assert len(rows) >= 10
    full = [r for r in rows if r.count("#") > 20]
    assert len(full) == 2 and all(float(r.split()[-1].rstrip("%")) > 40 for r in full), rows


def test_histogram_marks_mass_outside_the_expected_range():
    import torch

    from validator.reporters.figures import text_histogram
    from validator.stats import Distribution, histogram

    dist = Distribution("truncated_normal", mean=0.0, std=1.0, a=-3.0, b=3.0)
    sample = torch.randn(200_000, generator=torch.Generator().manual_seed(0)) * 1.5
    rows = text_histogram(histogram(sample, dist))
    assert rows[0].strip().startswith("< -3") and rows[-1].strip().startswith("> 3")
    assert len(rows) == 12 + 2


def test_the_per_challenge_line_names_unanswered_and_deferred_checks_as_such():
    """An unanswered question is "failed" in the data (it scores 0) but not a failure to report."""
    rep = report(check("passed", 3, 3), check("failed", 0, 1, "not answered: add it to answers.yaml", "question"),
                 check("skipped", 0, 1, "deferred to official grading: speed"), check("failed", 0, 1, "wrong values"))
    line = next(l for l in headline(rep).splitlines() if l.strip().startswith("c "))
    assert "1 deferred, 1 failed, 1 passed, 1 unanswered" in line


def test_student_text_is_shown_not_acted_on_and_markup_stays_text():
    """Escape sequences, CR and BS in an exception are shown as escapes (a terminal would obey them);
    bracketed text stays text (rich would read it as markup)."""
    from validator.reporters.terminal import render_challenge

    nasty = "raised:\n\x1b[2J\x1b]0;pwned\x07[bold]x[/bold]\rover\x08 ::error::y"
    result = ChallengeResult(id="c", title="C\x1b[31m", checks=[
        CheckResult(id="values", kind="values", status="failed", score=0, max_score=1, message=nasty),
        CheckResult(id="question_q", kind="question", status="failed", score=0, max_score=1,
                    message="you chose a: not the answer", answer="b) the right one", explanation="because")])
    out = io.StringIO()
    render_challenge(Console(file=out, width=200, color_system=None), result)
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text and "\x08" not in text and "\x07" not in text
    assert "\\x1b[2J\\x1b]0;pwned\\x07[bold]x[/bold]\\rover\\x08 ::error::y" in text
    assert "answer: b) the right one" in text and "why: because" in text  # submit-build: the key is the instructor's
