"""The autograder bundle's grading step (Gradescope's ``run_autograder``, the GitHub workflow).

    python -m validator.instructor.gradescope --root /autograder [--profile P] [--timeout S] [--memory MB]
    python -m validator.instructor.gradescope --summary results.json

:func:`autograde` grades ``ROOT/submission`` exactly as ``validator grade`` grades a
folder: the submission's regular files (never what a link points at) are copied into a
workspace only the grader can reach, the batch grader runs the canary (the reference
with the answer key) and then the submission in a worker forked from a warm template,
as an unprivileged uid in its own namespaces, with its limits and a scratch dir as cwd.
``ROOT/results/results.json`` is then written by this process from the verdicts the
batch grader computed; nothing the student's process could touch is read back.

The bundle's ``autograder.yaml`` may list the ``challenges`` graded (``validator release
--autograder DIR --challenge ID...`` writes it): the canary and the submission are graded
on those only. What was graded (the staged copy) and the batch grader's outputs stay in
``ROOT/results/graded/``, so that every path in ``grader.log`` still exists afterwards.

Where the machine cannot give the sandbox (no root, no namespaces, no uid switch), the
score is refused (0, with a grader error naming what is missing) unless the instructor
opted in to a degraded sandbox: ``VALIDATOR_ALLOW_DEGRADED=1`` in the environment, or
``allow_degraded: true`` in the bundle's ``autograder.yaml`` (``validator release
--autograder DIR --allow-degraded`` writes it). The output then says which defences ran.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, TextIO

NAME = "submission"  # the one submission's name in the batch grader's outputs
GRADED = "graded"  # under results/: the staged submission (submissions/) and the batch's outputs (gradebook/)
MAX_FILE_BYTES = 16 << 20  # a file over this is not copied (the batch's own, smaller caps apply after)
MAX_HELPERS = 20
SETTINGS_FILE = "autograder.yaml"
ALLOW_ENV = "VALIDATOR_ALLOW_DEGRADED"
EXIT_OK, EXIT_GRADER = 0, 3


# -- taking the submission in ---------------------------------------------------------------------------
def find_submission(folder: Path) -> Path | None:
    """The shallowest folder under ``folder`` holding a ``layers.py`` or a notebook, or the root of a student's
    repository (CS336's ``tests/adapters.py``, or a ``[tool.validator]`` mapping:
    :func:`validator.package.is_package_root`), a repository first at the same depth; links are not followed."""
    from validator.package import is_package_root

    found: list[tuple[int, int, str]] = []
    for current, dirs, names in os.walk(folder):  # os.walk does not descend into linked folders
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        depth = current.count(os.sep)
        if found and depth > min(found)[0]:
            continue
        if is_package_root(Path(current)):
            found.append((depth, 0, current))
        elif "layers.py" in names or _notebooks(names):
            found.append((depth, 1, current))
    return Path(min(found)[2]) if found else None


def _read_plain(path: Path, cap: int) -> bytes | None:
    """The bytes of a regular file that is not a link, or None (a link, a fifo, a device, too large)."""
    from validator.intake import IntakeError, read_submission_file

    try:
        return read_submission_file(path, cap=cap)
    except IntakeError:
        return None


def stage(source: Path, dest: Path) -> list[str]:
    """Copy ``layers.py``, ``answers.yaml`` and a few helper modules from ``source`` into ``dest``; or, for a
    student's repository (:func:`find_submission`), the files its intake would read.

    Only regular files are copied, never through a link, so the grader never reads, on a
    student's behalf, a file the student chose (the answer key, another student's answers).
    Returns notes for the student about what was left out.
    """
    from validator.package import is_package_root

    if is_package_root(source):
        return _stage_repository(source, dest)
    dest.mkdir(mode=0o700, parents=True)
    notes = []
    helpers = sorted(p.name for p in source.glob("*.py") if p.name != "layers.py")[:MAX_HELPERS]
    notebooks = _notebooks(os.listdir(source))[:MAX_HELPERS]  # graded in place without a layers.py
    for name in ["layers.py", "answers.yaml", *helpers, *notebooks]:
        path = source / name
        if not os.path.lexists(path):
            continue
        data = _read_plain(path, MAX_FILE_BYTES)
        if data is None:
            notes.append(f"{name} was not graded: not a regular file (a link?), or larger than "
                         f"{MAX_FILE_BYTES >> 20} MiB; submit the file itself")
            continue
        (dest / name).write_bytes(data)
    return notes


MAX_REPOSITORY_BYTES = 64 << 20  # what is copied of a repository; the package intake's own caps apply after


def _stage_repository(source: Path, dest: Path) -> list[str]:
    """A repository's files as its intake sees them (:func:`validator.package.walk_package`: no links, no hidden,
    environment, data or run-output folders), each a regular file of at most MAX_FILE_BYTES."""
    from validator.package import walk_package

    dest.mkdir(mode=0o700, parents=True)
    notes, total, left = [], 0, []
    for rel, path in walk_package(source):
        data = _read_plain(path, MAX_FILE_BYTES)
        if data is None or total + len(data) > MAX_REPOSITORY_BYTES:
            left.append(rel)
            continue
        total += len(data)
        target = dest / rel
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target.write_bytes(data)
    if left:
        shown = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
        notes.append(f"not copied for grading (a link, not a regular file, over {MAX_FILE_BYTES >> 20} MiB, or past "
                     f"{MAX_REPOSITORY_BYTES >> 20} MiB in all): {shown}")
    return notes


# -- the bundle's settings --------------------------------------------------------------------------
def settings(bundle: Path) -> dict[str, Any]:
    """``autograder.yaml`` as a mapping ({} where it is missing or unreadable)."""
    import yaml

    try:
        found = yaml.safe_load((bundle / SETTINGS_FILE).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    return found if isinstance(found, dict) else {}


def graded_challenges(bundle: Path) -> list[str] | None:
    """The challenges the bundle grades: ``challenges:`` of autograder.yaml, or None for all of them."""
    chosen = settings(bundle).get("challenges")
    if chosen in (None, "all"):
        return None
    if not isinstance(chosen, list) or not chosen or not all(isinstance(c, str) for c in chosen):
        raise ValueError(f"{SETTINGS_FILE}: `challenges` must be `all` or a list of challenge ids, got {chosen!r}")
    return chosen


def _notebooks(names) -> list[str]:
    return sorted(n for n in names if n.endswith(".ipynb") and not n.startswith("."))


# -- the sandbox ---------------------------------------------------------------------------------------
def allowed_degraded(bundle: Path) -> bool:
    """The instructor's explicit opt-in to grading without the full sandbox."""
    if os.environ.get(ALLOW_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    return settings(bundle).get("allow_degraded") is True


def sandbox_status() -> tuple[list[str], list[str]]:
    """(defences active on this machine, defences missing), as the batch grader's slots would plan them."""
    from validator.sandbox import FIRST_UID, Limits, defences, plan

    box = plan(Limits(), hide=[], files={}, uid=FIRST_UID)
    return defences(box), list(box.degraded)


# -- results ---------------------------------------------------------------------------------------------
def grader_error(message: str, sandbox_line: str) -> dict[str, Any]:
    """A results.json that is no grade: score 0, and a message saying it is the grader's problem."""
    return {"score": 0.0, "tests": [], "visibility": "visible", "stdout_visibility": "hidden",
            "output": f"GRADER ERROR, not a grade and not your fault: {message}\n"
                      "Course staff have the details in the autograder's log.\n" + sandbox_line}


def missing() -> dict[str, Any]:
    return {"score": 0.0, "output": "No layers.py, notebook or repository in the submission: upload "
                                    "student/layers.py (and student/answers.yaml), your notebook, or your repository "
                                    "(with its tests/adapters.py).", "tests": [], "visibility": "visible"}


def summary(results: dict[str, Any]) -> str:
    tests = results.get("tests", [])
    total = sum(t.get("max_score", 0) for t in tests)
    lines = [f"## Grade: {results.get('score', 0):g} / {total:g}", "", "| check | points |", "|---|---|"]
    lines += [f"| {'✅' if t['status'] == 'passed' else '❌'} {t['name']} | {t['score']:g}/{t['max_score']:g} |"
              for t in tests]
    if not tests:
        lines += ["", "```", str(results.get("output", ""))[:4000], "```"]
    return "\n".join(lines) + "\n"


def text_report(results: dict[str, Any]) -> str:
    """The student-visible report as plain text (for a CI log)."""
    lines = [str(results.get("output", "")), ""]
    for t in results.get("tests", []):
        lines.append(f"[{t['status']}] {t['name']}: {t['score']:g}/{t['max_score']:g}")
        if t["status"] != "passed" and t.get("output"):
            lines += ["    " + line for line in str(t["output"]).splitlines()]
    lines.append(f"score: {results.get('score', 0):g}")
    return "\n".join(lines) + "\n"


def _write(results_dir: Path, results: dict[str, Any], report: dict[str, Any] | None, log: str) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    graded = results_dir / GRADED
    if graded.is_dir():  # staged root-only while workers ran; readable now (an artifact upload reads it)
        for folder, dirs, files in os.walk(graded):
            os.chmod(folder, 0o755)
            for name in files:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o644)
    (results_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (results_dir / "report.txt").write_text(text_report(results), encoding="utf-8")
    (results_dir / "grader.log").write_text(log, encoding="utf-8")
    if report is not None:
        (results_dir / "report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


class _Tee(io.StringIO):
    def __init__(self, stream: TextIO):
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(text)
        self.stream.flush()
        return super().write(text)


# -- the grading step ------------------------------------------------------------------------------------
def autograde(*, root: str | Path, profile: str = "batch", timeout: float = 300.0, memory: int = 2048,
              allow_degraded: bool | None = None, stream: TextIO | None = None) -> int:
    """Grade ``root/submission`` in the sandbox and write ``root/results``; 0 when graded, 3 on a grader error."""
    from validator import paths

    started = time.monotonic()
    root = Path(root)
    results_dir = root / "results"
    log = _Tee(stream or sys.stderr)
    active, missing_defences = sandbox_status()
    sandbox_line = "sandbox: " + "; ".join(active) + (
        " -- MISSING: " + "; ".join(missing_defences) if missing_defences else "")
    print(sandbox_line, file=log)
    if allow_degraded is None:
        allow_degraded = allowed_degraded(paths.PROJECT_ROOT)
    try:
        challenges = graded_challenges(paths.PROJECT_ROOT)
    except ValueError as exc:
        print(f"error: {exc}", file=log)
        _write(results_dir, grader_error(f"the autograder is misconfigured ({exc}).", sandbox_line), None,
               log.getvalue())
        return EXIT_GRADER
    if missing_defences and not allow_degraded:
        print(f"error: refusing to grade: the sandbox is incomplete on this machine ({'; '.join(missing_defences)}). "
              f"Run the autograder as root where namespaces are allowed, or opt in to a degraded, unofficial "
              f"grade with {ALLOW_ENV}=1 or `allow_degraded: true` in {SETTINGS_FILE}.", file=log)
        _write(results_dir, grader_error("the autograder cannot isolate submissions on this machine, so it "
                                         "refuses to grade.", sandbox_line), None, log.getvalue())
        return EXIT_GRADER
    folder = find_submission((root / "submission").resolve())  # the folder itself may be a link the grader made
    if folder is None:
        _write(results_dir, missing(), None, log.getvalue())
        return EXIT_OK
    from validator.batch.grade import grade_folder  # imports torch: only once there is something to grade

    # Root's and 0700 while workers run (hidden from them too); kept afterwards, so the log's paths exist.
    work = results_dir / GRADED
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(mode=0o700, parents=True)
    os.chmod(results_dir, 0o755)
    notes = stage(folder, work / "submissions" / NAME)
    out = work / "gradebook"
    from validator.api import UsageError
    from validator.spec import SpecError

    try:
        status = grade_folder(submissions=work / "submissions", out=out, challenges=challenges, profile=profile,
                              timeout=timeout, memory=memory, workers=1, stream=log, live=False,
                              class_view=False)
    except (UsageError, SpecError) as exc:  # an unknown challenge in autograder.yaml, a spec that does not load
        print(f"error: {exc}", file=log)
        _write(results_dir, grader_error(f"the autograder is misconfigured ({exc}).", sandbox_line), None,
               log.getvalue())
        return EXIT_GRADER
    verdicts = out / "gradescope" / NAME / "results.json"
    if status == EXIT_OK and verdicts.is_file():
        results = json.loads(verdicts.read_text(encoding="utf-8"))
        report = json.loads((out / f"{NAME}.json").read_text(encoding="utf-8"))
    elif verdicts.is_file():  # the batch grader's stand-in report for a grader failure on this submission
        results = json.loads(verdicts.read_text(encoding="utf-8"))
        results["score"] = 0.0
        results["output"] = "GRADER ERROR, not a grade and not your fault: the grader failed on this " \
                            "submission; it will be regraded.\n" + results.get("output", "")
        report = None
    else:
        results, report = grader_error("the autograder's self-test (the reference, graded in the same "
                                       "sandbox) failed, so nothing was graded.", sandbox_line), None
    extra = [f"note: {n}" for n in notes]
    if missing_defences:
        extra.append("UNOFFICIAL: graded in a degraded sandbox, as the instructor allowed")
    results["output"] = "\n".join([*extra, results.get("output", ""), sandbox_line])
    results["execution_time"] = round(time.monotonic() - started, 1)
    _write(results_dir, results, report, log.getvalue())
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m validator.instructor.gradescope")
    parser.add_argument("--root", help="the autograder root (holding submission/ and results/)")
    parser.add_argument("--profile", default="batch")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--memory", type=int, default=2048)
    parser.add_argument("--summary", metavar="RESULTS_JSON", help="print a Markdown summary of a results.json")
    args = parser.parse_args(argv)
    if args.summary:
        sys.stdout.write(summary(json.loads(Path(args.summary).read_text(encoding="utf-8"))))
        return EXIT_OK
    if not args.root:
        parser.error("pass --root DIR or --summary FILE")
    return autograde(root=args.root, profile=args.profile, timeout=args.timeout, memory=args.memory)


if __name__ == "__main__":
    sys.exit(main())
