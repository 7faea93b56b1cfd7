"""`validator submit-build`: grade one student's layers.py and print the report."""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence, TextIO

import yaml

from validator import paths
from validator.grading import grade_challenge, load_reference
from validator.profiles import get_settings, profile_name
from validator.questions import AnswersError, ask, is_missing, load_answers, load_key
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


class UsageError(Exception):
    """Bad flags or inputs; the message is printed and the exit status is 2."""


def select_challenges(catalogue: dict[str, Challenge], wanted: Sequence[str] | None) -> list[Challenge]:
    if not wanted:
        return list(catalogue.values())
    unknown = [w for w in wanted if w not in catalogue]
    if unknown:
        raise UsageError(f"unknown challenge {', '.join(unknown)}; available: {', '.join(catalogue)}")
    return [catalogue[w] for w in wanted]


def ask_missing(challenges: list[Challenge], answers: dict[str, dict[str, Any]], answers_path: Path | None,
                read: Callable[[str], str] = input, out: TextIO = sys.stdout) -> int:
    """Ask for each missing answer at the terminal and save what was given; return how many."""
    asked = 0
    for ch in challenges:
        for q in ch.questions:
            if is_missing(answers.get(ch.id, {}).get(q.id)):
                try:
                    value = ask(ch, q, read=read, out=out)
                except EOFError:
                    return asked
                if value is not None:
                    answers.setdefault(ch.id, {})[q.id] = value
                    asked += 1
    if asked and answers_path is not None:
        answers_path.parent.mkdir(parents=True, exist_ok=True)
        answers_path.write_text(yaml.safe_dump(answers, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return asked


def submit_build(*, challenges: Sequence[str] | None = None, student: str | None = None,
                 answers: str | None = None, json_path: str | None = None, seed: int | None = None,
                 checks: Sequence[str] | None = None, profile: str | None = None,
                 interactive: bool | None = None, challenges_dir: str | None = None,
                 reference_dir: str | None = None, console=None) -> tuple[int, Report | None]:
    """Grade and report; returns (exit status, report)."""
    from rich.console import Console

    from validator.reporters import terminal
    from validator.reporters.json_report import write_json

    console = console or make_console()
    started = time.perf_counter()
    student_file = paths.student_file(student)
    if not student_file.exists():
        raise UsageError(f"no student file at {student_file} (pass --student PATH to a layers.py or its folder)")
    worker = Worker(student_file)
    worker.start()  # imports torch in parallel with spec loading and the reference import
    try:
        catalogue = load_catalogue(challenges_dir or paths.challenges_dir())
        selected = select_challenges(catalogue, challenges)
        ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
        ref_file = ref_dir / "layers.py"
        reference = load_reference(ref_file) if ref_file.exists() else None
        if reference is None:
            raise UsageError(f"no reference at {ref_file}: this copy cannot grade locally")
        key_all = load_key(ref_dir / "answer_key.yaml")
        answers_path = Path(answers) if answers else student_file.parent / "answers.yaml"
        given = load_answers(answers_path)
        if interactive is None:
            interactive = sys.stdin.isatty() and not checks
        if interactive:
            ask_missing(selected, given, answers_path)
        run_seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        prof = profile_name(profile)
        settings = get_settings(prof)
        terminal.render_header(console, seed=run_seed, profile=prof, student=str(student_file),
                               challenges=[c.id for c in selected] if challenges else [])
        results = []
        for ch in selected:
            res = grade_challenge(ch, worker=worker, reference=reference, reference_file=str(ref_file),
                                  student_file=student_file, seed=run_seed, settings=settings,
                                  answers=given.get(ch.id, {}), key=key_all.get(ch.id, {}),
                                  only_checks=set(checks) if checks else None, student_arg=student)
            results.append(res)
            terminal.render_challenge(console, res)
        report = Report(challenges=results, seed=run_seed, student=str(student_file), profile=prof,
                        duration_s=time.perf_counter() - started)
        terminal.render_summary(console, report)
        if json_path:
            write_json(report, json_path)
        return (EXIT_OK if report.ok else EXIT_SHORT), report
    finally:
        worker.close()


def main(*, console=None, **kwargs) -> int:
    """Entry for the CLI: turns usage, spec and answers problems into exit status 2."""
    from rich.console import Console

    console = console or make_console()
    err = Console(stderr=True, highlight=False)
    try:
        code, _ = submit_build(console=console, **kwargs)
        return code
    except SpecError as exc:
        err.print(f"[red]spec error[/]\n{exc}", markup=True, highlight=False)
        return EXIT_USAGE
    except (UsageError, AnswersError) as exc:
        err.print(f"[red]error:[/] {exc}")
        return EXIT_USAGE
