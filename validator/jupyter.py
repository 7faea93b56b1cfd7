"""Grade from inside Jupyter: ``validator.check("token_embedding")``, or ``%validator token_embedding``.

What is graded is the code this kernel ran: the inputs of its history (IPython's record of
every cell it executed, in the order it executed them, as typed), converted exactly as a
notebook file is (:mod:`validator.notebook`: definitions run, exploration does not, messages
name ``In [n]``). That is what the student ran, saved or not: no code is copied out of the
notebook by hand, and the kernel's objects are never touched. A cell run twice counts once,
where it was run last; ``%run other.ipynb`` brings in that notebook's cells, as it brought
them into the kernel.

The kernel does not grade: it starts ``python -m validator.jupyter`` (the same Python), which
grades like ``validator submit-build`` does -- the student's definitions run in its worker
process, never in the kernel's -- and writes the JSON and HTML reports; :func:`check` returns
them, and a notebook shows the HTML report (with its init histograms) as the cell's output.
``validator.check(notebook="work.ipynb")`` grades a saved notebook file instead of the history.

Conceptual answers: ``answers=`` takes the YAML text of ``answers.yaml`` (or its dict); left
out, a string or dict named ``ANSWERS`` in the kernel is used (a handout's answers cell sets it).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

KERNEL_NAME = "this kernel's cells"
ANSWERS_NAME = "ANSWERS"
DEFAULT_TIMEOUT = 900.0


class CheckError(Exception):
    """``check`` cannot start: not in a kernel and no notebook file given, or answers that are not YAML."""


@dataclass
class NotebookCheck:
    """What :func:`check` returns: the report (plain data), the HTML page, and what the grader printed.

    In a notebook it shows as the HTML report; ``.report`` is a :class:`validator.results.Report`
    (None if grading could not run: ``.error`` says why).
    """

    report: Any = None
    html: str = ""
    output: str = ""
    error: str | None = None
    returncode: int = 0
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return self.report.score if self.report is not None else 0.0

    @property
    def max_score(self) -> float:
        return self.report.max_score if self.report is not None else 0.0

    def summary(self) -> str:
        if self.skipped:
            return self.skipped
        if self.report is None:
            return f"not graded: {self.error or 'the grader did not answer'}"
        from validator.reporters.terminal import check_counts, verdict

        lines = [f"total {self.report.score:g}/{self.report.max_score:g}: {verdict(self.report)[1]}"]
        lines += [f"  {ch.id}: {ch.score:g}/{ch.max_score:g} ({check_counts(ch)})" for ch in self.report.challenges]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_html_(self) -> str:
        if self.report is None or not self.html:
            return f"<pre>{html.escape(self.summary())}\n{html.escape(self.output[-4000:])}</pre>"
        # the page has its own styles: in an iframe they cannot restyle the notebook around it
        return (f"<p><b>{html.escape(self.summary().splitlines()[0])}</b></p>"
                f'<iframe srcdoc="{html.escape(self.html, quote=True)}" style="width:100%;height:640px;'
                'border:1px solid #ddd;resize:vertical" title="validator report"></iframe>')


def check(*challenges: str, checks: Sequence[str] | None = None, answers: Any = None, seed: int | None = None,
          profile: str | None = None, notebook: str | os.PathLike | None = None,
          timeout: float = DEFAULT_TIMEOUT) -> NotebookCheck:
    """Grade what this kernel defined (or the saved ``notebook``) and return the report to show.

    ``challenges``: the challenges to grade; none given, every challenge whose classes and functions
    the graded cells all define. ``checks``, ``seed`` and ``profile`` are submit-build's ``--check``,
    ``--seed`` and ``--profile``. Inside ``%run other.ipynb`` it does nothing (the notebook that runs it
    is the one being graded).
    """
    import inspect

    caller = inspect.currentframe()
    namespace = caller.f_back.f_globals if caller is not None and caller.f_back is not None else {}
    shell = _shell()
    running = namespace.get("__file__") or (shell.user_ns.get("__file__") if shell is not None else None)
    if str(running or "").endswith(".ipynb") and notebook is None:  # IPython's %run sets __file__ meanwhile
        return NotebookCheck(skipped="validator.check: skipped inside %run (the notebook that runs this one grades it)")
    if answers is None and shell is not None:
        answers = shell.user_ns.get(ANSWERS_NAME)
    with tempfile.TemporaryDirectory(prefix="validator-check-") as work:
        work_dir = Path(work)
        command = [sys.executable, "-m", "validator.jupyter", "--json", str(work_dir / "report.json"),
                   "--html", str(work_dir / "report.html")]
        if notebook is not None:
            command += ["--notebook", str(Path(notebook).resolve())]
        else:
            if shell is None:
                raise CheckError("validator.check grades the cells of a Jupyter (IPython) kernel: call it in a "
                                 "notebook, or pass notebook='your_notebook.ipynb'")
            (work_dir / "cells.json").write_text(json.dumps(history_cells(shell)), encoding="utf-8")
            command += ["--cells", str(work_dir / "cells.json"), "--base", os.getcwd()]
        if answers is not None:
            command += ["--answers", str(_write_answers(answers, work_dir / "answers.yaml"))]
        command += [a for c in challenges for a in ("--challenge", c)]
        command += [a for c in checks or [] for a in ("--check", c)]
        command += (["--seed", str(seed)] if seed is not None else []) + (["--profile", profile] if profile else [])
        return _run(command, work_dir, timeout)


def history_cells(shell: Any) -> list[dict[str, str]]:
    """The kernel's executed inputs, in order, as typed: ``{"label": "In [n]", "source": ...}``.

    An input run again counts only where it was run last, as the kernel's state has it.
    """
    raw = list(getattr(shell.history_manager, "input_hist_raw", []) or [])
    last: dict[str, int] = {}
    for n, source in enumerate(raw):
        if n and isinstance(source, str) and source.strip():
            last[source] = n
    return [{"label": f"In [{n}]", "source": raw[n]} for n in sorted(last.values())]


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def _write_answers(answers: Any, path: Path) -> Path:
    import yaml

    from validator.intake import IntakeError, parse_answers

    text = answers if isinstance(answers, str) else yaml.safe_dump(answers, sort_keys=False, allow_unicode=True) \
        if isinstance(answers, dict) else None
    if text is None:
        raise CheckError(f"answers must be the YAML text of answers.yaml or a dict, not {type(answers).__name__}")
    try:
        parse_answers(text, where="answers")
    except IntakeError as exc:
        raise CheckError(str(exc)) from None
    path.write_text(text, encoding="utf-8")
    return path


def _run(command: list[str], work: Path, timeout: float) -> NotebookCheck:
    """Run the grader process and read back what it wrote."""
    import validator

    env = dict(os.environ)
    package_root = str(Path(validator.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.pop("JPY_PARENT_PID", None)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return NotebookCheck(error=f"the grader did not finish in {timeout:g} s", returncode=-1)
    output = (done.stdout or "") + (done.stderr or "")
    result = NotebookCheck(output=output, returncode=done.returncode)
    report_file, page = work / "report.json", work / "report.html"
    if not report_file.is_file():
        result.error = (done.stderr or done.stdout or f"exit status {done.returncode}").strip()[-2000:]
        return result
    from validator.batch.reports import report_from_dict

    result.report = report_from_dict(json.loads(report_file.read_text(encoding="utf-8")))
    result.html = page.read_text(encoding="utf-8") if page.is_file() else ""
    result.notes = list(result.report.notes)
    return result


# -- the magic ------------------------------------------------------------------------------------------
def load_ipython_extension(shell: Any) -> None:
    """``%load_ext validator.jupyter`` registers ``%validator [CHALLENGE...] [--check ID] [--seed N] [--profile P]``."""

    def magic(line: str):
        parser = argparse.ArgumentParser(prog="%validator", add_help=False)
        parser.add_argument("challenges", nargs="*")
        parser.add_argument("--check", action="append", dest="checks")
        parser.add_argument("--seed", type=int)
        parser.add_argument("--profile")
        parser.add_argument("--notebook")
        try:
            args = parser.parse_args(line.split())
        except SystemExit:
            print("usage: %validator [CHALLENGE ...] [--check ID] [--seed N] [--profile P] [--notebook PATH]")
            return None
        return check(*args.challenges, checks=args.checks, seed=args.seed, profile=args.profile,
                     notebook=args.notebook)

    shell.register_magic_function(magic, "line", "validator")


# -- the grader process ---------------------------------------------------------------------------------------
def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m validator.jupyter",
                                     description="grade a Jupyter kernel's cells (what validator.check starts)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cells", help="JSON list of {label, source}: a kernel's history")
    source.add_argument("--notebook", help="a notebook file (or folder of notebooks) to grade instead")
    parser.add_argument("--base", help="the kernel's working folder: where %%run finds notebooks")
    parser.add_argument("--challenge", action="append", dest="challenges")
    parser.add_argument("--check", action="append", dest="checks")
    parser.add_argument("--answers")
    parser.add_argument("--json", dest="json_path", required=True)
    parser.add_argument("--html", dest="html_path")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--profile")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from rich.console import Console

    from validator.api import UsageError
    from validator.notebook import Cell, NotebookError, convert, load
    from validator.questions import AnswersError
    from validator.spec import SpecError, load_catalogue
    from validator import paths
    from validator.submit import EXIT_USAGE, SubmitOptions, grade_notebook_module, make_console

    args = _parse(argv)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    started = time.perf_counter()
    try:
        if args.notebook:
            target = Path(args.notebook)
            module = load(target, name=target.name if target.is_file() else None)
        else:
            data = json.loads(Path(args.cells).read_text(encoding="utf-8"))
            base = args.base or os.getcwd()
            cells = [Cell("code", str(c["source"]), str(c["label"]), notebook=KERNEL_NAME, base=base) for c in data]
            module = convert(cells, name=KERNEL_NAME, root=base)
            module.kernel = module.plural = True
        challenges = args.challenges or _defined_challenges(module, load_catalogue(paths.challenges_dir()))
        if not challenges:
            raise UsageError(f"{module.name} define no class or function of any challenge yet: name one, e.g. "
                             "validator.check(\"token_embedding\")")
        opts = SubmitOptions(challenges=challenges, checks=args.checks, answers=args.answers, student=args.notebook,
                             json_path=args.json_path, html_path=args.html_path, seed=args.seed,
                             profile=args.profile, interactive=False)
        code, _ = grade_notebook_module(module, opts, started=started, console=make_console(sys.stdout))
        return code
    except SpecError as exc:
        err.print(f"spec error\n{exc}", markup=False)
    except (UsageError, AnswersError, NotebookError) as exc:
        err.print(f"error: {exc}", markup=False)
    return EXIT_USAGE


def _defined_challenges(module: Any, catalogue: dict) -> list[str]:
    """The challenges every entry of which the graded cells define (classes and functions at top level)."""
    defined = set(module.defined)
    return [cid for cid, ch in catalogue.items() if ch.entries and set(ch.entries) <= defined]


if __name__ == "__main__":
    sys.exit(main())
