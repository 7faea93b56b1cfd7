"""The gradebook: one CSV row per submission (name, score, max score, one column per challenge, review).

``review`` is empty, or the reasons (joined by `` | ``) why a person should look at the
submission: the integrity scan or the runtime evidence found signs of evading the grader.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Sequence

from validator.reporters import write_atomic
from validator.reporters.sanitize import one_line
from validator.results import Report


def challenge_columns(reports: Sequence[Report], order: Sequence[str] = ()) -> list[str]:
    """Challenge ids in catalogue ``order``, then any other id the reports hold, first seen first."""
    seen = list(order)
    for r in reports:
        for ch in r.challenges:
            if ch.id not in seen:
                seen.append(ch.id)
    return seen


def grades_csv(rows: Sequence[tuple[str, Report]], *, challenges: Sequence[str] = ()) -> str:
    """``rows`` are (submission name, report) pairs, written in name order."""
    columns = challenge_columns([r for _, r in rows], challenges)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "score", "max_score", *columns, "review"])
    for name, report in sorted(rows, key=lambda row: row[0]):
        by_id = {ch.id: ch.score for ch in report.challenges}
        writer.writerow([_safe(one_line(name)), f"{report.score:g}", f"{report.max_score:g}",
                         *[f"{by_id[c]:g}" if c in by_id else "" for c in columns],
                         _safe(one_line(" | ".join(report.review)[:1000]))])
    return out.getvalue()


def _safe(cell: str) -> str:
    """Keep a spreadsheet from reading a name like ``=HYPERLINK(...)`` as a formula."""
    return "'" + cell if cell[:1] in ("=", "+", "-", "@", "\t", "\r") else cell


def write_csv(rows: Sequence[tuple[str, Report]], path: str | Path, **kwargs) -> None:
    write_atomic(path, grades_csv(rows, **kwargs))
