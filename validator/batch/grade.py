"""`validator grade`: grade a folder of submissions, each in its own sandboxed worker.

Writes, per submission ``NAME``: ``OUT/NAME.json`` (the ``submit-build --json``
report), ``OUT/gradescope/NAME/results.json``, ``OUT/junit/NAME.xml`` and
``OUT/html/NAME.html`` (the ``submit-build --html`` page, for staff to read); for
the run: ``OUT/grades.csv`` (``grades-I-of-N.csv`` for a shard) and the
manifest ``OUT/shards/shard-I-of-N.json`` that ``validator merge`` reads.

Before anyone is graded, a *canary* -- the reference, with the answer key's
answers -- is graded by the same pool, sandbox and limits (see :func:`run_canary`):
if it loses a point, the grader's own environment is broken (a package the
worker cannot import, a path the sandbox hides), nothing is graded and the run
stops with a grader error that names the checks and what was out of reach.

A wrong answer's right answer and the key's explanation follow the answer policy
(``show_answers``, :data:`validator.questions.SHOW_ANSWERS`): by default they are only
in ``gradescope/NAME/results.json``, as a test Gradescope shows after the due date. The
questions drawn per student use the submission's name as the student's id (or the id
``student_ids`` gives it: Gradescope's submitter). Every output shows student text
without acting on it (:mod:`validator.reporters.sanitize`), the progress lines too.

Exit status: 0 when every submission was graded, whatever the scores; 2 for a
usage error; 3 when the grader itself failed (the canary, some submission, or at all).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence, TextIO

import yaml

from validator import lifetime, paths
from validator.api import UsageError, select_challenges
from validator.batch.pool import Outcome, Pool
from validator.batch.progress import Progress, printable
from validator.batch.reports import failed_report, report_from_dict
from validator.batch.submissions import discover, parse_shard
from validator.reporters.csv_report import write_csv
from validator.reporters.gradescope import write_gradescope
from validator.reporters.html import write_html
from validator.reporters.json_report import write_json
from validator.reporters.junit import write_junit
from validator.results import Report

EXIT_OK, EXIT_USAGE, EXIT_GRADER = 0, 2, 3
CANARY = ".canary"  # a hidden name: ``discover`` never yields it, so no submission can take it
_MISSING_MODULE = re.compile(r"No module named '([A-Za-z0-9_.]+)'")


def grader_paths(*extra: str | Path) -> list[str]:
    """What a worker must not see: the grader's folders (not the Python install inside them), plus ``extra``."""
    from validator import sandbox

    grader_code = Path(sandbox.__file__).resolve().parent
    runtime = [Path(p) for p in sandbox.runtime_dirs() if Path(p) != grader_code]
    root = paths.PROJECT_ROOT.resolve()
    hidden = [paths.reference_dir(), paths.challenges_dir(), *extra]
    if not any(r == root or root in r.parents for r in runtime):
        hidden.append(root)
    else:
        for child in root.iterdir():
            if not any(r == child or child in r.parents for r in runtime):
                hidden.append(child)
    return [str(Path(p).resolve()) for p in hidden]


# -- the canary: the grader proves its environment before it grades anyone ------------------------
def canary_folder(*, reference_dir: str | Path, into: str | Path, catalogue: dict | None = None) -> Path:
    """A submission folder holding the reference's ``layers.py`` and the answer key's answers, formulas
    evaluated for the canary's own numbers (it is graded as the student :data:`CANARY`)."""
    from validator.questions import key_answers
    from validator.spec import load_catalogue

    reference_dir, folder = Path(reference_dir), Path(into) / CANARY
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    (folder / "layers.py").write_bytes((reference_dir / "layers.py").read_bytes())
    key_file = reference_dir / "answer_key.yaml"
    key = yaml.safe_load(key_file.read_text(encoding="utf-8")) if key_file.is_file() else None
    catalogue = load_catalogue(paths.challenges_dir()) if catalogue is None else catalogue
    answers = key_answers(key or {}, catalogue, CANARY)
    (folder / "answers.yaml").write_text(yaml.safe_dump(answers, sort_keys=True), encoding="utf-8")
    return folder


def canary_problem(outcome: Outcome, *, degraded: Sequence[str] = ()) -> str | None:
    """None when the canary scored full marks; otherwise what lost points, and what the sandbox hid."""
    if outcome.error is not None or outcome.report is None:
        lost = [f"  the grader failed on it: {(outcome.error or 'no report').strip()[-2000:]}"]
        score = "no score"
    else:
        report = report_from_dict(outcome.report)
        if report.score >= report.max_score:
            return None
        score = f"{report.score:g}/{report.max_score:g}"
        lost = []
        for ch in report.challenges:
            if ch.problem:
                lost.append(f"  {ch.id}: {ch.problem.strip()[:600]}")
            for c in ch.checks:
                if c.score < c.max_score:  # a question's message may quote the key: never printed
                    said = "check the answer key's entry" if c.kind == "question" else c.message.strip()[:400]
                    lost.append(f"  {ch.id}/{c.id} ({c.kind}): {c.status}, {c.score:g}/{c.max_score:g}: {said}")
        lost += [f"  note: {n}" for n in report.notes]
    lines = [f"the grader's self-test failed, so nobody was graded: the reference with the answer key, "
             f"graded in the same sandbox and limits as the submissions, got {score} "
             "(a grader problem, never a student's):", *dict.fromkeys(lost[:40])]
    lines += unreachable("\n".join(lost))
    if degraded:
        lines.append("  sandbox weaker than intended: " + "; ".join(degraded))
    return "\n".join(lines)


def unreachable(text: str) -> list[str]:
    """Explain each module the worker could not import: where the grader finds it, what the sandbox shows."""
    from validator.sandbox import runtime_dirs

    shown = runtime_dirs()
    out = []
    for name in dict.fromkeys(m.split(".")[0] for m in _MISSING_MODULE.findall(text)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        where = (spec.origin or (list(spec.submodule_search_locations or []) or [None])[0]) if spec else None
        if where is None:
            out.append(f"  the worker cannot import {name!r}, and neither can the grader's Python "
                       f"({sys.executable}): install it there (e.g. `{sys.executable} -m pip install {name}`)")
        else:
            out.append(f"  the worker cannot import {name!r}, which the grader's Python finds at {where}: the "
                       f"sandbox shows the worker only {', '.join(shown)}; install it inside one of them, or "
                       "grade with --no-isolation to confirm it is the sandbox")
    return out


def slot_config(*, challenges: Sequence[str], seed: int, profile: str, limits, isolate: bool = True,
                hide: Sequence[str | Path] = (), fail_fast: bool = False,
                student_ids: dict[str, str] | None = None) -> dict:
    """What every grading slot of a :class:`Pool` is told: the challenges, the seed and profile, the
    sandbox's limits, what the workers must not see (the grader's folders plus ``hide``), whether
    to stop each submission at its first check that loses points (``validator strength``), and the
    student id of a submission whose id is not its name (``student_ids``; Gradescope's submitter)."""
    return {"challenges": list(challenges), "seed": seed, "profile": profile, "limits": vars(limits),
            "isolate": isolate, "hide": grader_paths(*hide), "fail_fast": fail_fast,
            "student_ids": dict(student_ids or {}),
            "reference_dir": str(paths.reference_dir()), "challenges_dir": str(paths.challenges_dir())}


def write_outputs(out: Path, name: str, report: Report, *, show_answers: str = "never") -> None:
    """A submission's reports. A wrong answer's right answer and explanation follow ``show_answers``: in
    every report when ``always``; in results.json's tests that Gradescope shows after the due date when
    ``after_due_date``; nowhere otherwise."""
    from validator.questions import withhold_answers
    from validator.reporters.sanitize import safe_report

    report = safe_report(report)  # once: each writer finds it made visible already
    shown = withhold_answers(report, show_answers)
    write_json(shown, out / f"{name}.json")
    write_gradescope(report, out / "gradescope" / name / "results.json", show_answers=show_answers)
    write_junit(shown, out / "junit" / f"{name}.xml", name=name)
    write_html(shown, out / "html" / f"{name}.html", title=f"validator report: {name}")


def grade_folder(*, submissions: str | Path, out: str | Path, challenges: Sequence[str] | None = None,
                 workers: int | None = None, timeout: float = 300.0, memory: int = 2048,
                 shard: str | None = None, seed: int | None = None, profile: str = "batch", isolate: bool = True,
                 stream: TextIO | None = None, live: bool | None = None, canary: bool = True,
                 canary_dir: str | Path | None = None, compare: str | Path | None = None,
                 no_lowering: bool = False, boilerplate: Sequence[str | Path] | None = None,
                 public_solutions: str | Path | None = None, signatures: str | Path | None = None,
                 class_view: bool = True, show_answers: str | None = None,
                 student_ids: dict[str, str] | None = None) -> int:
    """Grade every submission (of this shard) under ``submissions``; return the exit status.

    The canary (``canary_dir``, by default the reference and its key) is graded first on the same
    warm slots; if it loses a point the run stops with :data:`EXIT_GRADER` and writes no gradebook.
    ``seed`` defaults to :data:`~validator.reference_side.OFFICIAL_SEED`: with a seed and profile that
    handouts record, every reproduce line of the feedback replays in a student's handout.
    ``show_answers`` (:data:`validator.questions.SHOW_ANSWERS`, default ``after_due_date``) is whether a
    wrong answer's feedback gives the right one; ``student_ids`` maps a submission's name to its
    student's id where they differ (the numbers of questions drawn per student come from the id).
    Then the class outputs (:func:`class_outputs`): the dashboard, with ``compare`` the regrade's audit
    against a previous output folder (``no_lowering``: the gradebook keeps each student's higher
    grade), the similarity of the submissions' code (``boilerplate`` files excluded besides the
    handout's stub, ``public_solutions`` compared too), failure patterns named by ``signatures``
    (default ``challenges/signatures.json`` when present). ``class_view=False`` (one submission graded
    for itself, the autograder bundle) writes the gradebook and manifest only.
    """
    from validator.profiles import get_settings
    from validator.questions import OFFICIAL_SHOW_ANSWERS, show_answers_setting
    from validator.reference_side import OFFICIAL_SEED, RECORD_PROFILES, RECORD_SEEDS
    from validator.sandbox import Limits
    from validator.spec import load_catalogue

    started = time.monotonic()
    seed = OFFICIAL_SEED if seed is None else seed
    which = parse_shard(shard)
    if timeout <= 0 or memory <= 0:
        raise UsageError("--timeout and --memory must be positive")
    try:
        get_settings(profile)
        show_answers = show_answers_setting(OFFICIAL_SHOW_ANSWERS if show_answers is None else show_answers,
                                            where="--show-answers")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    catalogue = load_catalogue(paths.challenges_dir())
    selected = select_challenges(catalogue, challenges)
    subs = which.select(discover(submissions))
    if (compare or no_lowering) and not class_view:
        raise UsageError("--compare and --no-lowering are part of the class view")
    if no_lowering and not compare:
        raise UsageError("--no-lowering needs --compare PREVIOUS_OUT: the grades it must not lower")
    if compare is not None:
        from validator.batch.compare import load_run

        previous_run = load_run(compare)  # a usage error now, before anyone is graded
    if public_solutions is not None and not Path(public_solutions).is_dir():
        raise UsageError(f"--public-solutions {public_solutions}: not a folder")
    for extra in boilerplate or ():
        if not Path(extra).exists():
            raise UsageError(f"--boilerplate {extra}: no such file or folder")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    workers = max(1, workers or os.cpu_count() or 1)
    limits = Limits(wall_s=float(timeout), cpu_s=max(1, int(timeout)), memory_mb=int(memory))
    canary_tmp = tempfile.TemporaryDirectory(prefix="validator-canary-")  # root's, 0700; hidden below
    config = slot_config(challenges=[c.id for c in selected], seed=seed, profile=profile, limits=limits,
                         isolate=isolate, hide=(submissions, out, canary_tmp.name, *([canary_dir] if canary_dir else [])),
                         student_ids=student_ids)
    progress = Progress(len(subs), stream=stream, live=live)
    progress.log(f"grading {len(subs)} submission(s) from {submissions}"
                 + (f" (shard {which.index}/{which.count})" if which.count > 1 else "")
                 + f" with {min(workers, max(1, len(subs)))} worker(s); seed {seed}, profile {profile}, "
                 f"limits: {timeout:g} s, {memory} MB per submission; the right answer to a wrong one shown: {show_answers}")
    if seed not in RECORD_SEEDS or profile not in RECORD_PROFILES:
        progress.log(f"note: handouts record seeds {', '.join(map(str, RECORD_SEEDS))} and profiles "
                     f"{', '.join(RECORD_PROFILES)}: with seed {seed} and profile {profile}, the reproduce lines "
                     "of this feedback replay where the reference is, not in a student's handout")
    rows: list[tuple[str, Report]] = []
    failures: list[str] = []
    folders = {s.name: s.folder for s in subs}
    docs: dict = {}
    digests: dict[str, str] = {}
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
        write_outputs(out, outcome.name, report, show_answers=show_answers)
        rows.append((outcome.name, report))
        if class_view:
            docs[outcome.name], digests[outcome.name] = submission_evidence(out, outcome.name, folders[outcome.name])
        progress.advance(outcome.name, f"{summary} in {outcome.seconds:.1f} s")
        lifetime.freeze_heap(collect=1)  # the reports and fingerprints kept for the class outputs: see below

    pool = Pool(config, workers=workers, watchdog_s=2 * timeout + 300, on_ready=on_ready, keep=True)
    # What is alive now (torch, the catalogue) and what each submission leaves for the class outputs lives as
    # long as the batch: frozen before grading and after each submission, no full collection walks it again
    # (they took a third of this process's CPU: 23 of them, 3.4 s for 100 submissions).
    lifetime.freeze_heap(collect=1)
    try:
        pool.start(min(workers, max(1, len(subs))))  # all slots warm up while the canary is graded
        if canary:
            folder = Path(canary_dir) if canary_dir else canary_folder(reference_dir=paths.reference_dir(),
                                                                       into=canary_tmp.name, catalogue=catalogue)
            problem = run_canary(pool, folder, out=out, progress=progress, degraded=degraded_seen)
            if problem:
                progress.close()
                print(f"error: {problem}", file=stream or sys.stderr)
                return EXIT_GRADER
        pool.run([(s.name, str(s.folder.resolve())) for s in subs], on_result)
    except RuntimeError as exc:
        progress.close()
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_GRADER
    finally:
        pool.close()
        progress.close()
        canary_tmp.cleanup()
    from validator.batch.compare import run_fingerprints

    csv_name = "grades.csv" if which.count == 1 else f"grades-{which.label}.csv"
    manifest = {"shard": which.index, "shards": which.count, "seed": seed, "profile": profile,
                "challenges": [c.id for c in selected], "submissions": sorted(n for n, _ in rows),
                "grader_failures": sorted(failures), "sandbox_degraded": sorted(degraded_seen),
                "worker_uids": sorted(uids),
                "fingerprints": run_fingerprints(selected, reference_dir=paths.reference_dir()) if class_view else None,
                "submission_digests": dict(sorted(digests.items())),
                "class_options": {"compare": str(Path(compare).resolve()) if compare else None,
                                  "no_lowering": no_lowering,
                                  "boilerplate": [str(Path(b).resolve()) for b in boilerplate or ()],
                                  "public_solutions": str(Path(public_solutions).resolve()) if public_solutions else None,
                                  "signatures": str(Path(signatures).resolve()) if signatures else None}}
    if class_view:
        class_outputs(out, rows, run=manifest, challenges=selected, docs=docs, csv_name=csv_name,
                      label="" if which.count == 1 else which.label, whole=which.count == 1,
                      previous_run=previous_run if compare is not None else None, stream=stream or sys.stderr)
    else:
        write_csv(rows, out / csv_name, challenges=[c.id for c in selected])
    manifest["seconds"] = round(time.monotonic() - started, 1)
    (out / "shards").mkdir(exist_ok=True)
    (out / "shards" / f"shard-{which.label}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    elapsed = time.monotonic() - started
    rate = len(rows) / elapsed * 60 if elapsed else 0.0
    print(f"graded {len(rows)} submission(s) in {elapsed:.0f} s ({rate:.1f}/min); "
          f"{len(failures)} grader failure(s); gradebook: {out / csv_name}", file=stream or sys.stderr)
    return EXIT_GRADER if failures else EXIT_OK


def submission_evidence(out: Path, name: str, folder: Path):
    """The submission's code fingerprints (kept as ``OUT/similarity/NAME.json`` for merge) and the digest of
    its files and answers (for a later ``--compare``). Read as the grader's intake reads files."""
    from validator.batch.compare import submission_digest
    from validator.batch.similarity import fingerprint, read_sources
    from validator.intake import IntakeError, read_submission_file
    from validator.reporters import write_atomic

    files = read_sources(folder)
    try:
        answers = read_submission_file(folder / "answers.yaml", cap=64 * 1024)
    except (IntakeError, OSError):
        answers = None
    doc = fingerprint(name, files)
    write_atomic(out / "similarity" / f"{name}.json", json.dumps(doc.to_dict()))
    return doc, submission_digest(files, answers)


def class_outputs(out: Path, rows: list[tuple[str, Report]], *, run: dict, challenges: Sequence, docs: dict,
                  csv_name: str, label: str, whole: bool, previous_run: dict | None, stream: TextIO) -> None:
    """What a run (or a merge) writes about the whole class: the gradebook (after ``--no-lowering``), the
    regrade's audit, and the dashboard with its failure patterns and code similarity."""
    from validator.batch import compare as compare_runs
    from validator.batch import dashboard, signatures as sigs, similarity

    started = time.monotonic()
    options = run.get("class_options") or {}
    comparison = None
    if previous_run is not None:
        comparison = compare_runs.compare(previous_dir=options["compare"], previous_run=previous_run, current_run=run,
                                          current=rows, no_lowering=bool(options.get("no_lowering")), whole=whole)
        compare_runs.write(comparison, out)
        print(comparison.summary(), file=stream)
    write_csv(compare_runs.gradebook_rows(rows, comparison, previous_dir=options.get("compare") or out),
              out / csv_name, challenges=[c.id for c in challenges])
    notes: list[str] = []
    try:
        signatures = sigs.load(options.get("signatures"))
    except ValueError as exc:
        signatures, notes = None, [str(exc)]
    if signatures is None and not notes:
        notes.append(f"no signatures file ({options.get('signatures') or sigs.default_path()}): failure patterns are "
                     "unnamed; build it with `validator signatures`")
    elif signatures is not None:
        notes += sigs.stale_challenges(signatures, challenges, seed=run.get("seed", 0), profile=run.get("profile", ""))
    boilerplate = similarity.boilerplate_kgrams([*similarity.default_boilerplate(), *options.get("boilerplate", [])])
    public = similarity.public_docs(options["public_solutions"]) if options.get("public_solutions") else []
    ranked = similarity.rank([docs[n] for n, _ in sorted(rows, key=lambda r: r[0]) if n in docs],
                             boilerplate=boilerplate, public=public)
    everyone = {**docs, **{d.name: d for d in public}}
    data = dashboard.build(rows, order=[c.id for c in challenges], signatures=signatures, signature_notes=notes,
                           similarity=ranked, docs=everyone, boilerplate=boilerplate, comparison=comparison,
                           run={k: run.get(k) for k in ("seed", "profile", "shards", "grader_failures")})
    dashboard.write(data, out, name="dashboard" + (f"-{label}" if label else ""))
    known = sum(p["relation"] != "unnamed" for p in data["patterns"])
    print(f"dashboard: {out / ('dashboard' + (f'-{label}' if label else '') + '.html')} ({len(data['patterns'])} "
          f"failure pattern(s), {known} named; {len(ranked.flagged)} similar pair(s) flagged; "
          f"{time.monotonic() - started:.1f} s)", file=stream)


def run_canary(pool: Pool, folder: Path, *, out: Path, progress: Progress, degraded: set[str]) -> str | None:
    """Grade the canary on ``pool``'s warm slots; None when it scored full marks, else the error to print."""
    outcomes: list[Outcome] = []
    pool.run([(CANARY, str(Path(folder).resolve()))], outcomes.append)
    outcome = outcomes[0] if outcomes else Outcome(CANARY, None, "the canary was not graded", 0.0)
    problem = canary_problem(outcome, degraded=sorted(degraded))
    if problem is None:
        progress.log(f"self-test: the reference and the answer key scored full marks in the sandbox "
                     f"({outcome.seconds:.1f} s)")
    elif outcome.report is not None:
        (out / "canary.json").write_text(json.dumps(outcome.report, indent=2) + "\n")
    return problem


def main(*, stream: TextIO | None = None, **kwargs) -> int:
    """Entry for the CLI: usage and spec problems exit 2, grader failures 3."""
    from validator.spec import SpecError

    try:
        return grade_folder(stream=stream, **kwargs)
    except (UsageError, SpecError) as exc:
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_USAGE
