"""The JSON report: the interface contract other tools and CI read (student text made visible, see
:mod:`validator.reporters.sanitize`)."""

from __future__ import annotations

from pathlib import Path

from validator.reporters import readable_json, write_atomic
from validator.reporters.sanitize import safe_report
from validator.results import Report


def report_dict(report: Report) -> dict:
    return safe_report(report).to_dict()


def write_json(report: Report, path: str | Path) -> None:
    write_atomic(path, readable_json(report_dict(report), flat_below=4) + "\n")
