"""`validator submit-build`: grade one student's layers.py and print the report."""

from __future__ import annotations

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO


from validator import paths
from validator.api import UsageError, check_device, grade, handout_seeds, select_challenges
from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file
from validator.parallel import default_jobs
from validator.profiles import profile_name
from validator.questions import (STUDENT_KEY, AnswersError, answer_formats, ask, declared_id, is_missing, load_answers,
                                 save_answers, set_student_id)
from validator.results import Report
from validator.spec import Challenge, SpecError, load_catalogue
from validator.worker.client import Worker

EXIT_OK, EXIT_SHORT, EXIT_USAGE = 0, 1, 2


def make_console(file=None):
    """A rich console; off a terminal it keeps long lines whole instead of wrapping at 80."""
    from rich.console import Console

    stream = file or sys.stdout
    tty = hasattr(stream, "isatty") and stream.isatty()
    return Console(file=stream, highlight=False, width=None if tty else 200, soft_wrap=not tty)


def ask_missing(challenges: list[Challenge], answers: dict[str, dict[str, Any]], answers_path: Path | None,
                read: Callable[[str], str] = input, out: TextIO = sys.stdout, *, student: str | None = None) -> int:
    """Ask for each missing answer at the terminal and save what was given; return how many.

    The answers file is edited in place (:func:`validator.questions.save_answers`): the questions and
    choices written in it as comments, and every other answer, stay as they were. A question drawn per
    student is asked with ``student``'s numbers.
    """
    given: dict[str, dict[str, Any]] = {}
    try:
        for ch in challenges:
            for q in ch.questions:
                if is_missing(answers.get(ch.id, {}).get(q.id)):
                    value = ask(ch, q, read=read, out=out, student=student)
                    if value is not None:
                        given.setdefault(ch.id, {})[q.id] = value
                        answers.setdefault(ch.id, {})[q.id] = value
    except EOFError:
        pass
    if given and answers_path is not None:
        if not save_answers(answers_path, given):
            out.write(f"note: {answers_path} could not be edited in place, so it was rewritten whole "
                      "(every answer kept, its comments lost)\n")
    return sum(len(v) for v in given.values())


@dataclass(frozen=True)
class SubmitOptions:
    """What one `submit-build` run was asked for, said once (the CLI's flags, or a caller's keywords).

    ``student`` is a layers.py, a folder holding one, or the root of the student's own package
    graded through a mapping (its pyproject.toml's ``[tool.validator]``, or ``map_path``).
    ``html_path`` also writes the report as one self-contained HTML page (plots included); a failure
    to write it is printed and never changes the grade or the exit status.
    """

    challenges: Sequence[str] | None = None
    student: str | None = None
    map_path: str | None = None
    answers: str | None = None
    student_id: str | None = None
    json_path: str | None = None
    html_path: str | None = None
    seed: int | None = None
    checks: Sequence[str] | None = None
    profile: str | None = None
    interactive: bool | None = None
    timeout: float | None = None
    device: str | None = None
    jobs: int | None = None
    challenges_dir: str | None = None
    reference_dir: str | None = None
    watch: bool = False  # `main` keeps regrading on each save (validator/watch.py); `submit_build` grades once


def _adapters_elsewhere(student: str | Path | None, depth: int = 3) -> str:
    """A sentence naming an ``adapters.py`` the folder holds elsewhere than CS336's ``tests/adapters.py``, the file
    that makes a folder a package the grader reads (a repository that moved it next to its code), or ""."""
    from validator.package import _skipped_dir

    folder = Path(student) if student else None
    if folder is None or not folder.is_dir():
        return ""
    found: list[str] = []
    pending = [(folder, 0)]
    while pending and len(found) < 3:
        here, level = pending.pop()
        try:
            entries = sorted(here.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir():  # the folders a package's intake never reads are not looked in either
                if level < depth and not _skipped_dir(str(here), entry.name, level == 0):
                    pending.append((entry, level + 1))
            elif entry.name == "adapters.py" and not entry.is_symlink():
                found.append(entry.relative_to(folder).as_posix())
    if not found:
        return ""
    return (f". This folder holds {', '.join(found)}: the grader reads CS336's tests/adapters.py, at the root of the "
            "repository, beside the package it imports (cs336_basics/): put the adapters there")


def submit_build(*, console=None, **options: Any) -> tuple[int, Report | None]:
    """Grade and report; returns (exit status, report). ``options`` are :class:`SubmitOptions`' fields."""
    opts = SubmitOptions(**options)
    console = console or make_console()
    started = time.perf_counter()
    check_device(opts.device)
    root = _package_root(opts.student, opts.map_path)
    if root is not None:
        return _submit_package(root, opts, started=started, console=console)
    notebook = _notebook_target(opts.student)
    if notebook is not None:
        return _submit_notebook(notebook, opts, started=started, console=console)
    student_file = paths.student_file(opts.student)
    if not student_file.exists():
        raise UsageError(f"no student file at {student_file} (pass --student PATH to a layers.py or its folder, or "
                         "to the root of your own package with a [tool.validator.map] table in its pyproject.toml or "
                         "a --map file: see docs/packages.md)" + _adapters_elsewhere(opts.student))
    if student_file.suffix != ".py" or (not student_file.is_file() and not student_file.is_symlink()):
        raise UsageError(f"--student {opts.student}: {student_file} is not a Python file (pass a layers.py or the "
                         "folder that holds one)")
    try:  # the same bounds as batch grading: a regular file, not a link, at most MAX_SOURCE_BYTES
        read_submission_file(student_file, cap=MAX_SOURCE_BYTES, what=str(student_file))
    except IntakeError as exc:
        raise UsageError(str(exc)) from None
    if opts.answers and not Path(opts.answers).is_file():
        raise UsageError(f"--answers {opts.answers}: no such file (leave --answers out to use answers.yaml beside "
                         "layers.py)")
    worker = Worker(student_file)
    worker.start()  # imports torch while the specs load and questions are asked
    try:
        catalogue = load_catalogue(opts.challenges_dir or paths.challenges_dir())
        selected = select_challenges(catalogue, opts.challenges)
        return _grade_and_report(worker, student_file, catalogue, selected, opts, started=started, console=console)
    finally:
        worker.close()


def write_html_report(report: Report, path: str, console) -> bool:
    """Write ``--html PATH``; a failure is one clear line on the console, never a traceback."""
    from rich.markup import escape

    from validator.reporters.html import write_html
    from validator.reporters.sanitize import visible

    try:
        write_html(report, path)
    except Exception as exc:  # noqa: BLE001 - the grade stands whatever happens to the picture
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
        console.print(f"[red]could not write the HTML report to {escape(str(path))}:[/] {escape(visible(str(why)))} "
                      "(the grade above is unaffected)", soft_wrap=True)
        return False
    console.print(f"  HTML report: {escape(str(path))}", soft_wrap=True)
    return True


def _package_root(student: str | None, map_path: str | None) -> Path | None:
    """The package root to grade through a mapping, or None for a layers.py (the usual case)."""
    from validator.package import is_package_root

    if map_path is not None:
        root = Path(student) if student else Path.cwd()
        if not root.is_dir():
            raise UsageError(f"--map {map_path}: --student must then be the root folder of your package, "
                             f"and {root} is not a folder")
        if not Path(map_path).is_file():
            raise UsageError(f"--map {map_path}: no such file")
        return root
    if student and is_package_root(Path(student)):
        return Path(student)
    return None


def _submit_package(root: Path, opts: SubmitOptions, *, started: float, console) -> tuple[int, Report]:
    """submit-build for a student's own package: read and check the mapping, stage the files, grade."""
    from validator.package import MapError, load_package

    if opts.answers and not Path(opts.answers).is_file():
        raise UsageError(f"--answers {opts.answers}: no such file (leave --answers out to use answers.yaml at the "
                         "package root)")
    catalogue = load_catalogue(opts.challenges_dir or paths.challenges_dir())
    try:  # before any process starts: a mapping that cannot be used is a usage error, with every problem named
        package = load_package(root, catalogue, map_path=opts.map_path, map_arg=opts.map_path)
    except MapError as exc:
        raise UsageError("the package's mapping cannot be used:\n  " + "\n  ".join(exc.problems)) from None
    wanted = list(opts.challenges or []) or package.mapped_challenges(list(catalogue))
    from validator.adapters import ADAPTERS_FILE

    stubbed = package.stubbed_challenges(list(catalogue))
    if not wanted:
        if stubbed:
            raise UsageError(f"{root / ADAPTERS_FILE}: every adapter the challenges call still raises "
                             f"NotImplementedError (the course's stub), so nothing can be graded yet: fill in the "
                             f"run_* functions of {', '.join(stubbed)}, or map your classes under [tool.validator.map]")
        raise UsageError(f"{package.map_name} maps no entry of any challenge: add lines like "
                         '"token_embedding.Embedding" = "your_package.module:YourClass" under [tool.validator.map]')
    if stubbed and not opts.challenges:  # graded as far as the repository goes: say what it leaves out
        package.notes.append(f"not graded yet: {', '.join(stubbed)}, whose run_* functions in {ADAPTERS_FILE} still "
                             "raise NotImplementedError (the course's stub)")
    selected = select_challenges(catalogue, wanted)
    with package.staged_worker(root) as worker:
        worker.start()
        return _grade_and_report(worker, root, catalogue, selected, opts, started=started, console=console,
                                 package=package)


def _notebook_target(student: str | None) -> Path | None:
    """A notebook (or a folder of notebooks without a layers.py) to grade in place, else None."""
    from validator.notebook import find_target

    return find_target(student)


def _submit_notebook(target: Path, opts: SubmitOptions, *, started: float, console) -> tuple[int, Report]:
    """submit-build for a notebook: its code cells become the module the worker imports (validator/notebook.py)."""
    from validator.notebook import NotebookError, load

    try:
        notebook = load(target, name=target.name if target.is_file() else None)
    except NotebookError as exc:
        raise UsageError(str(exc)) from None
    return grade_notebook_module(notebook, opts, started=started, console=console)


def grade_notebook_module(notebook, opts: SubmitOptions, *, started: float, console) -> tuple[int, Report]:
    """Grade a converted notebook (a :class:`validator.notebook.NotebookModule`): from a file, or from a
    Jupyter kernel's history (validator/jupyter.py); the report names cells, never the generated module."""
    if opts.answers and not Path(opts.answers).is_file():
        raise UsageError(f"--answers {opts.answers}: no such file (leave --answers out to use the notebook's "
                         "answers cell, or answers.yaml beside it)")
    from rich.markup import escape

    console.print(f"[dim]notebook {escape(notebook.summary())}[/]", soft_wrap=True)
    with notebook.staged() as module_file:
        worker = Worker(module_file)
        worker.start()
        try:
            notebook.note_import(worker)
            catalogue = load_catalogue(opts.challenges_dir or paths.challenges_dir())
            selected = select_challenges(catalogue, opts.challenges)
            return _grade_and_report(worker, module_file, catalogue, selected, opts, started=started,
                                     console=console, notebook=notebook)
        finally:
            worker.close()


def _notebook_answers(notebook, opts: SubmitOptions) -> tuple[Path | None, dict, bool]:
    """(where asked answers are saved, the answers, whether to ask): --answers, else the notebook's answers
    cell (never rewritten, so nothing is asked), else answers.yaml beside the notebook."""
    if opts.answers:
        return Path(opts.answers), load_answers(Path(opts.answers)), True
    if notebook.answers is not None:
        return None, {cid: dict(qs) for cid, qs in notebook.answers.items()}, False
    folder = notebook.folder or Path.cwd()
    return folder / "answers.yaml", load_answers(folder / "answers.yaml"), True


def _grade_and_report(worker: Worker, student_file: Path, catalogue, selected, opts: SubmitOptions, *,
                      started: float, console, package=None, notebook=None) -> tuple[int, Report]:
    from validator.reporters import terminal
    from validator.reporters.json_report import write_json

    checks = opts.checks
    if checks:
        known = {c.id for ch in selected for c in ch.checks}
        unknown = [c for c in checks if c not in known]
        if unknown:
            where = ", ".join(c.id for c in selected)
            raise UsageError(f"--check {', '.join(unknown)}: no such check in {where}; checks there: "
                             + ", ".join(sorted(known)))
    may_ask = True
    if notebook is not None:
        answers_path, given, may_ask = _notebook_answers(notebook, opts)
    else:
        answers_path = Path(opts.answers) if opts.answers else (
            student_file if package is not None else student_file.parent) / "answers.yaml"
        given = load_answers(answers_path)
    if opts.student_id is not None:
        student_id = " ".join(opts.student_id.split())
        if not student_id:
            raise UsageError("--student-id needs your id (on Gradescope: the email you submit with)")
        if answers_path is not None:  # a notebook's answers cell is never rewritten: the id holds for this run
            set_student_id(answers_path, student_id)
        given[STUDENT_KEY] = {"id": student_id}
    student = declared_id(given)
    interactive = opts.interactive
    if interactive is None:
        interactive = sys.stdin.isatty() and not checks and may_ask
    if interactive:
        ask_missing(selected, given, answers_path, student=student)
    recorded = handout_seeds(challenges=[c.id for c in selected], challenges_dir=opts.challenges_dir,
                             reference_dir=opts.reference_dir)
    seed = opts.seed
    if recorded and seed is not None and seed not in recorded:
        raise UsageError(f"this handout holds reference results for seeds {', '.join(map(str, recorded))} "
                         f"only; --seed {seed} is not one of them")
    run_seed = seed if seed is not None else (random.SystemRandom().choice(recorded) if recorded
                                               else random.SystemRandom().randrange(2**31))
    prof = profile_name(opts.profile)
    shown = str(student_file) if notebook is None else str(opts.student or notebook.name)
    render = (lambda res: terminal.render_challenge(console, res)) if notebook is None else \
        (lambda res: terminal.render_challenge(console, notebook.remap_result(res)))
    terminal.render_header(console, seed=run_seed, profile=prof, student=shown,
                           challenges=[c.id for c in selected] if opts.challenges else [], device=opts.device,
                           student_arg=opts.student, checks=list(checks or []),
                           map_arg=package.map_arg if package is not None else None)
    if not checks:
        terminal.render_answer_formats(console, {c.id: answer_formats(c, given.get(c.id, {})) for c in selected})
        terminal.render_numbers(console, selected, student)
    report = grade(student_file, challenges=[c.id for c in selected], seed=run_seed, profile=prof,
                   answers=given, checks=checks, reference_dir=opts.reference_dir, worker=worker,
                   catalogue=catalogue, student_arg=opts.student, timeout=opts.timeout, device=opts.device,
                   jobs=default_jobs(len(selected)) if opts.jobs is None else max(1, opts.jobs),
                   on_challenge=render, package=package, student_id=student)
    if notebook is not None:
        notebook.finish(report, student=shown)
    report.duration_s = time.perf_counter() - started
    terminal.render_summary(console, report)
    if opts.json_path:
        write_json(report, opts.json_path)
    if opts.html_path:
        write_html_report(report, opts.html_path, console)
    return (EXIT_OK if report.ok or (recorded and _handout_ok(report)) else EXIT_SHORT), report


def _handout_ok(report: Report) -> bool:
    """In a handout, checks deferred to official grading and recorded answers do not make a run fall short."""
    from validator.reporters.terminal import is_deferred

    return all(c.ok or is_deferred(c) for ch in report.challenges for c in ch.checks)


def main(*, console=None, **kwargs) -> int:
    """Entry for the CLI: turns usage, spec and answers problems into exit status 2."""
    from rich.console import Console
    from rich.markup import escape

    from validator.reporters.sanitize import visible

    console = console or make_console()
    err = Console(stderr=True, highlight=False, soft_wrap=True)  # paths and commands stay whole for copy-paste
    try:
        opts = SubmitOptions(**kwargs)
        if opts.watch:  # the first run as usual, then a regrade of what each save changed
            from validator.watch import watch_build

            return watch_build(opts, console=console)
        code, _ = submit_build(console=console, **kwargs)
        return code
    except SpecError as exc:  # messages are data: "[tool.validator.map]" is text, not markup
        err.print(f"[red]spec error[/]\n{escape(visible(str(exc)))}")
        return EXIT_USAGE
    except (UsageError, AnswersError) as exc:  # may quote a file's text: shown, never acted on
        err.print(f"[red]error:[/] {escape(visible(str(exc)))}")
        return EXIT_USAGE

