"""Gradescope's autograder ``results.json``: one test per check, the report's total as the score.

Format: https://gradescope-autograders.readthedocs.io/en/latest/specs/ (top-level
``score``, ``execution_time``, ``output``, ``tests`` with ``name``, ``score``,
``max_score``, ``status``, ``output``, ``visibility``).

Every string is made :func:`~validator.reporters.sanitize.visible` (student text shown, never acted on).
A wrong answer's right answer and explanation follow the answer policy ``show_answers``
(:data:`validator.questions.SHOW_ANSWERS`): ``never`` leaves them out; ``always`` puts them in the
question's output; ``after_due_date`` puts them in a test of their own, without points, whose
``visibility`` is ``after_due_date``, so that Gradescope shows it only once the due date (and any late
due date) has passed.
"""

from __future__ import annotations

from pathlib import Path

from validator.questions import is_withheld, revealed_lines, show_answers_setting, withhold_answers
from validator.reporters import readable_json, write_atomic
from validator.reporters.figures import figure_lines
from validator.reporters.sanitize import safe_report
from validator.results import Report

MAX_OUTPUT_CHARS = 8000


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "\n... (cut)"


def gradescope_dict(report: Report, *, visibility: str = "visible", show_answers: str = "never") -> dict:
    show = show_answers_setting(show_answers)
    full = safe_report(report)
    report = withhold_answers(full, show)
    tests = []
    for ch, whole in zip(report.challenges, full.challenges):
        for c, kept in zip(ch.checks, whole.checks):
            lines = [c.title] if c.title else []
            if ch.problem and c.status == "error":
                lines.append(f"problem: {ch.problem}")
            if c.message:
                lines.append(c.message)
            if not c.ok:
                lines.extend(figure_lines(c.figures))
            lines.extend(revealed_lines(c))  # what the policy shows now (a correct answer's explanation)
            if c.reproduce:
                lines.append(f"reproduce: {c.reproduce}")
            if c.review:
                lines.append("MARKED FOR REVIEW: " + "; ".join(c.review))
            tests.append({"name": f"{ch.id} / {c.id}", "name_format": "text", "number": f"{ch.id}.{c.id}",
                          "score": c.score, "max_score": c.max_score,
                          "status": "passed" if c.ok else "failed", "output": _clip("\n".join(lines)),
                          "output_format": "text", "tags": [c.kind], "visibility": visibility})
            if show == "after_due_date" and is_withheld(kept):
                tests.append({"name": f"{ch.id} / {c.id}: the answer", "name_format": "text",
                              "number": f"{ch.id}.{c.id}.answer",
                              "output": _clip("\n".join([kept.title, *revealed_lines(kept)])),
                              "output_format": "text", "tags": ["answer"], "visibility": "after_due_date"})
    summary = ["MARKED FOR REVIEW by course staff: " + "; ".join(report.review)] if report.review else []
    summary += [f"{ch.id}: {ch.score:g}/{ch.max_score:g}" + (f" ({ch.problem})" if ch.problem else "")
               for ch in report.challenges]
    summary += [f"note: {n}" for n in report.notes]
    summary.append(f"seed {report.seed}, profile {report.profile}")
    return {"score": report.score, "max_score": report.max_score,
            "execution_time": round(report.duration_s, 3), "output": _clip("\n".join(summary)),
            "output_format": "text", "visibility": visibility, "stdout_visibility": "hidden", "tests": tests}


def write_gradescope(report: Report, path: str | Path, **kwargs) -> None:
    write_atomic(path, readable_json(gradescope_dict(report, **kwargs), flat_below=2) + "\n")
