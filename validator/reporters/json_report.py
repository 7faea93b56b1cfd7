"""The JSON report: the interface contract other tools and CI read."""

from __future__ import annotations

import json
from pathlib import Path

from validator.results import Report


def report_dict(report: Report) -> dict:
    return report.to_dict()


def write_json(report: Report, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(report_dict(report), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
