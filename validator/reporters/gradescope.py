"""Gradescope's autograder ``results.json``: one test per check, the report's total as the score.

Format: https://gradescope-autograders.readthedocs.io/en/latest/specs/ (top-level
``score``, ``execution_time``, ``output``, ``tests`` with ``name``, ``score``,
``max_score``, ``status``, ``output``, ``visibility``).
"""

from __future__ import annotations

import json
from pathlib import Path

from validator.reporters import write_atomic
from validator.reporters.figures import figure_lines
from validator.results import Report

MAX_OUTPUT_CHARS = 8000


def _clip(text: str) -> str:
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "\n... (cut)"


def gradescope_dict(report: Report, *, visibility: str = "visible") -> dict:
    tests = []
    for ch in report.challenges:
        for c in ch.checks:
            lines = [c.title] if c.title else []
            if ch.problem and c.status == "error":
                lines.append(f"problem: {ch.problem}")
            if c.message:
                lines.append(c.message)
            if not c.ok:
                lines.extend(figure_lines(c.figures))
            if c.reproduce:
                lines.append(f"reproduce: {c.reproduce}")
            if c.review:
                lines.append("MARKED FOR REVIEW: " + "; ".join(c.review))
            tests.append({"name": f"{ch.id} / {c.id}", "name_format": "text", "number": f"{ch.id}.{c.id}",
                          "score": c.score, "max_score": c.max_score,
                          "status": "passed" if c.ok else "failed", "output": _clip("\n".join(lines)),
                          "output_format": "text", "tags": [c.kind], "visibility": visibility})
    summary = ["MARKED FOR REVIEW by course staff: " + "; ".join(report.review)] if report.review else []
    summary += [f"{ch.id}: {ch.score:g}/{ch.max_score:g}" + (f" ({ch.problem})" if ch.problem else "")
               for ch in report.challenges]
    summary += [f"note: {n}" for n in report.notes]
    summary.append(f"seed {report.seed}, profile {report.profile}")
    return {"score": report.score, "max_score": report.max_score,
            "execution_time": round(report.duration_s, 3), "output": _clip("\n".join(summary)),
            "output_format": "text", "visibility": visibility, "stdout_visibility": "hidden", "tests": tests}


def write_gradescope(report: Report, path: str | Path, **kwargs) -> None:
    write_atomic(path, json.dumps(gradescope_dict(report, **kwargs), indent=2) + "\n")
