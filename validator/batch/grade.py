"""`validator grade`: grade a folder of submissions, each in its own sandboxed worker.

Writes, per submission ``NAME``: ``OUT/NAME.json`` (the ``submit-build --json``
report), ``OUT/gradescope/NAME/results.json`` and ``OUT/junit/NAME.xml``; for
the run: ``OUT/grades.csv`` (``grades-I-of-N.csv`` for a shard) and the
manifest ``OUT/shards/shard-I-of-N.json`` that ``validator merge`` reads.

Exit status: 0 when every submission was graded, whatever the scores; 2 for a
usage error; 3 when the grader itself failed (on some submission, or at all).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence, TextIO

from validator import paths
from validator.api import UsageError, select_challenges
from validator.batch.pool import Outcome, Pool
from validator.batch.progress import Progress, printable
from validator.batch.reports import failed_report, report_from_dict
from validator.batch.submissions import discover, parse_shard
from validator.reporters.csv_report import write_csv
from validator.reporters.gradescope import write_gradescope
from validator.reporters.json_report import write_json
from validator.reporters.junit import write_junit
from validator.results import Report

EXIT_OK, EXIT_USAGE, EXIT_GRADER = 0, 2, 3


def grader_paths(*extra: str | Path) -> list[str]:
    """What a worker must not see: the grader's folders (not the Python install inside them), plus ``extra``."""
    runtime = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    root = paths.PROJECT_ROOT.resolve()
    hidden = [paths.reference_dir(), paths.challenges_dir(), *extra]
    if not any(r == root or root in r.parents for r in runtime):
        hidden.append(root)
    else:
        for child in root.iterdir():
            if not any(r == child or child in r.parents for r in runtime):
                hidden.append(child)
    return [str(Path(p).resolve()) for p in hidden]


def write_outputs(out: Path, name: str, report: Report) -> None:
    write_json(report, out / f"{name}.json")
    write_gradescope(report, out / "gradescope" / name / "results.json")
    write_junit(report, out / "junit" / f"{name}.xml", name=name)


def grade_folder(*, submissions: str | Path, out: str | Path, challenges: Sequence[str] | None = None,
                 workers: int | None = None, timeout: float = 300.0, memory: int = 2048,
                 shard: str | None = None, seed: int = 0, profile: str = "batch", isolate: bool = True,
                 stream: TextIO | None = None, live: bool | None = None) -> int:
    """Grade every submission (of this shard) under ``submissions``; return the exit status."""
    from validator.profiles import get_settings
    from validator.sandbox import Limits
    from validator.spec import load_catalogue

    started = time.monotonic()
    which = parse_shard(shard)
    if timeout <= 0 or memory <= 0:
        raise UsageError("--timeout and --memory must be positive")
    try:
        get_settings(profile)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    catalogue = load_catalogue(paths.challenges_dir())
    selected = select_challenges(catalogue, challenges)
    subs = which.select(discover(submissions))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    workers = max(1, workers or os.cpu_count() or 1)
    limits = Limits(wall_s=float(timeout), cpu_s=max(1, int(timeout)), memory_mb=int(memory))
    config = {"challenges": [c.id for c in selected], "seed": seed, "profile": profile,
              "limits": vars(limits), "isolate": isolate,
              "hide": grader_paths(submissions, out), "reference_dir": str(paths.reference_dir()),
              "challenges_dir": str(paths.challenges_dir())}
    progress = Progress(len(subs), stream=stream, live=live)
    progress.log(f"grading {len(subs)} submission(s) from {submissions}"
                 + (f" (shard {which.index}/{which.count})" if which.count > 1 else "")
                 + f" with {min(workers, max(1, len(subs)))} worker(s); seed {seed}, profile {profile}, "
                 f"limits: {timeout:g} s, {memory} MB per submission")
    rows: list[tuple[str, Report]] = []
    failures: list[str] = []
    degraded_seen: set[str] = set()

    uids: set[int] = set()

    def on_ready(message: dict) -> None:
        if isinstance(message.get("uid"), int):
            uids.add(message["uid"])
        for d in message.get("degraded", []):
            if d not in degraded_seen:
                degraded_seen.add(d)
                progress.log(f"warning: sandbox weaker than intended: {d}")

    def on_result(outcome: Outcome) -> None:
        if outcome.report is not None and outcome.error is None:
            report = report_from_dict(outcome.report)
            summary = f"{report.score:g}/{report.max_score:g}"
        else:
            failures.append(outcome.name)
            problem = "the grader failed on this submission (not the student's fault); regrade it"
            report = failed_report(outcome.name, selected, problem, seed=seed, profile=profile)
            summary = "GRADER FAILURE"
            progress.log(f"grader failure on {printable(outcome.name)}:\n{outcome.error}")
        write_outputs(out, outcome.name, report)
        rows.append((outcome.name, report))
        progress.advance(outcome.name, f"{summary} in {outcome.seconds:.1f} s")

    pool = Pool(config, workers=workers, watchdog_s=2 * timeout + 300, on_ready=on_ready)
    try:
        pool.run([(s.name, str(s.folder.resolve())) for s in subs], on_result)
    except RuntimeError as exc:
        progress.close()
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_GRADER
    finally:
        progress.close()
    csv_name = "grades.csv" if which.count == 1 else f"grades-{which.label}.csv"
    write_csv(rows, out / csv_name, challenges=[c.id for c in selected])
    manifest = {"shard": which.index, "shards": which.count, "seed": seed, "profile": profile,
                "challenges": [c.id for c in selected], "submissions": sorted(n for n, _ in rows),
                "grader_failures": sorted(failures), "sandbox_degraded": sorted(degraded_seen),
                "worker_uids": sorted(uids),
                "seconds": round(time.monotonic() - started, 1)}
    (out / "shards").mkdir(exist_ok=True)
    (out / "shards" / f"shard-{which.label}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    elapsed = time.monotonic() - started
    rate = len(rows) / elapsed * 60 if elapsed else 0.0
    print(f"graded {len(rows)} submission(s) in {elapsed:.0f} s ({rate:.1f}/min); "
          f"{len(failures)} grader failure(s); gradebook: {out / csv_name}", file=stream or sys.stderr)
    return EXIT_GRADER if failures else EXIT_OK


def main(*, stream: TextIO | None = None, **kwargs) -> int:
    """Entry for the CLI: usage and spec problems exit 2, grader failures 3."""
    from validator.spec import SpecError

    try:
        return grade_folder(stream=stream, **kwargs)
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_USAGE
