"""Glue for run_autograder: a submit-build JSON report to Gradescope's results.json, and a CI summary.

    python -m validator.instructor.gradescope report.json results.json [--log report.txt]
    python -m validator.instructor.gradescope --missing results.json
    python -m validator.instructor.gradescope --summary results.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def to_gradescope(report: dict[str, Any], log: str = "") -> dict[str, Any]:
    """The shared Gradescope reporter applied to a report read back from JSON."""
    from validator.batch.reports import report_from_dict
    from validator.reporters.gradescope import gradescope_dict

    out = gradescope_dict(report_from_dict(report))
    if log:
        out["output"] += "\n\n" + log[-8000:]
    return out


def missing() -> dict[str, Any]:
    return {"score": 0.0, "output": "No layers.py in the submission: upload student/layers.py "
                                    "(and student/answers.yaml).", "tests": [], "visibility": "visible"}


def summary(results: dict[str, Any]) -> str:
    tests = results.get("tests", [])
    total = sum(t.get("max_score", 0) for t in tests)
    lines = [f"## Grade: {results.get('score', 0):g} / {total:g}", "", "| check | points |", "|---|---|"]
    lines += [f"| {'✅' if t['status'] == 'passed' else '❌'} {t['name']} | {t['score']:g}/{t['max_score']:g} |"
              for t in tests]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validator.instructor.gradescope")
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--log")
    parser.add_argument("--missing", action="store_true")
    parser.add_argument("--summary", action="store_true")
    args = parser.parse_args(argv)
    if args.summary:
        sys.stdout.write(summary(json.loads(Path(args.paths[0]).read_text())))
        return 0
    if args.missing:
        Path(args.paths[-1]).write_text(json.dumps(missing(), indent=2))
        return 0
    report_path, out = Path(args.paths[0]), Path(args.paths[1])
    if not report_path.exists():
        log = Path(args.log).read_text(errors="replace") if args.log and Path(args.log).exists() else ""
        out.write_text(json.dumps({"score": 0.0, "tests": [], "visibility": "visible",
                                   "output": "the grader produced no report:\n" + log[-20000:]}, indent=2))
        return 0
    log = Path(args.log).read_text(errors="replace") if args.log and Path(args.log).exists() else ""
    out.write_text(json.dumps(to_gradescope(json.loads(report_path.read_text()), log), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
