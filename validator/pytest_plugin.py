"""A pytest plugin: the checks of `validator submit-build` as pytest test items.

`pytest --validator` (or ``validator = true`` under ``[tool.pytest.ini_options]``)
collects one item per check and per question of every selected challenge, named
``<layers.py>::<challenge>::<check>``, and nothing else unless paths are named on
the command line (a project's own ``testpaths`` are not graded). Verdicts, seeds
and reproduce lines are those of `submit-build`: items are graded through the
same Python API, one grading run per challenge per process, restricted to the
items that survive ``-k`` / ``-m`` selection (plus the checks they ``require``).
In a handout the seed is one the handout recorded, so every reproduce line
replays there. With ``-n`` (pytest-xdist) every worker uses the seed the
controller drew, so verdicts do not depend on how items were distributed.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

_SEED_KEY = "validator_seed"
_REPORTS_KEY = "validator_reports"  # what an xdist worker graded, sent to the controller for --validator-html


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("validator", "grade LLM-layer challenges as test items")
    group.addoption("--validator", action="store_true", default=None,
                    help="collect the checks of every challenge as test items")
    group.addoption("--validator-student", metavar="PATH",
                    help="a layers.py or a folder holding one, a notebook (.ipynb) or a folder of notebooks "
                         "(default: as submit-build: ./student)")
    group.addoption("--validator-challenge", action="append", metavar="ID", dest="validator_challenges",
                    help="only this challenge (repeatable; default: all)")
    group.addoption("--validator-seed", type=int, metavar="N", help="replay a run: the seed in the header")
    group.addoption("--validator-profile", choices=["quick", "default", "ci"],
                    help="hypothesis effort (default: 'ci' when $CI is set, else 'default')")
    group.addoption("--validator-answers", metavar="PATH", help="answers YAML (default: beside layers.py)")
    group.addoption("--validator-html", metavar="PATH",
                    help="also write the graded challenges as submit-build --html does: one page, with the "
                         "init histograms")
    parser.addini("validator", type="bool", default=False, help="collect the validator's checks as test items")
    parser.addini("validator_student", default="", help="default for --validator-student")


def _enabled(config: pytest.Config) -> bool:
    flag = config.getoption("--validator")
    return bool(flag if flag is not None else config.getini("validator"))


class _Run:
    """What one pytest process needs to grade: options resolved once, reports cached per challenge.

    Every problem with the options (no student file, an unusable mapping, an unknown challenge, a seed
    a handout did not record) is a :class:`pytest.UsageError` here, before anything is collected.
    """

    def __init__(self, config: pytest.Config):
        from validator import paths
        from validator.api import UsageError, select_challenges
        from validator.package import MapError, is_package_root, load_package
        from validator.profiles import profile_name
        from validator.spec import SpecError, load_catalogue

        arg = config.getoption("--validator-student") or config.getini("validator_student") or None
        self.student_arg = arg
        self.student_file = paths.student_file(arg)
        self.package = None  # a student's own package, graded through its [tool.validator] mapping
        self.notebook = _notebook(arg)  # a notebook, or a folder of them, graded in place (validator/notebook.py)
        self.profile = profile_name(config.getoption("--validator-profile"))
        self.challenges = config.getoption("validator_challenges")
        self.answers_arg = config.getoption("--validator-answers")
        self.selected: dict[str, set[str]] = {}
        self.reports: dict[str, Any] = {}
        self.html = config.getoption("--validator-html")
        self.started = time.perf_counter()
        try:
            catalogue = load_catalogue(paths.challenges_dir())
            if arg and is_package_root(Path(arg)):
                try:
                    self.package = load_package(Path(arg), catalogue)
                except MapError as exc:
                    raise UsageError("the package's mapping cannot be used:\n  " + "\n  ".join(exc.problems)) from None
                self.student_file = Path(arg)
            elif self.notebook is None and not self.student_file.is_file():
                raise UsageError(f"no student file at {self.student_file} (pass --validator-student PATH to a "
                                 "layers.py or its folder, or to the root of your package with a "
                                 "[tool.validator.map] table in its pyproject.toml)")
            wanted = self.challenges or (self.package.mapped_challenges(list(catalogue)) if self.package else None)
            self.challenges_selected = select_challenges(catalogue, wanted)
            self.seed = _seed(config, [c.id for c in self.challenges_selected])
        except (UsageError, SpecError) as exc:
            raise pytest.UsageError(f"--validator: {exc}") from None

    @property
    def target(self) -> Path:
        """The file the check items are collected under: layers.py, a package's mapping file, or the notebook (the
        first of a folder of them)."""
        if self.notebook is not None:
            path = self.notebook[1]
            return (path if path.is_file() else min(path.glob("*.ipynb"))).resolve()
        return (self.package.map_file if self.package is not None else self.student_file).resolve()

    def result(self, challenge_id: str, check_id: str):
        """The check's result, grading its challenge (selected checks only) the first time it is asked."""
        if challenge_id not in self.reports and self.notebook is not None:
            self.reports[challenge_id] = self._grade_notebook(challenge_id)
        if challenge_id not in self.reports:
            from validator.api import grade
            from validator.questions import load_answers

            folder = self.student_file if self.package is not None else self.student_file.parent
            answers_path = Path(self.answers_arg) if self.answers_arg else folder / "answers.yaml"
            report = grade(self.student_file, challenges=[challenge_id], seed=self.seed, profile=self.profile,
                           answers=load_answers(answers_path), checks=sorted(self.selected.get(challenge_id, ()))
                           or None, student_arg=self.student_arg, package=self.package)
            self.reports[challenge_id] = report.challenges[0]
        result = self.reports[challenge_id]
        for check in result.checks:
            if check.id == check_id:
                return result, check
        return result, None

    def _grade_notebook(self, challenge_id: str):
        from validator.notebook import grade_notebook
        from validator.questions import load_answers

        module, _ = self.notebook
        answers = load_answers(Path(self.answers_arg)) if self.answers_arg else None
        if answers is None and module.answers is None and module.folder is not None:
            answers = load_answers(module.folder / "answers.yaml")
        report = grade_notebook(module, student=self.student_arg or module.name, answers=answers,
                                challenges=[challenge_id], seed=self.seed, profile=self.profile,
                                checks=sorted(self.selected.get(challenge_id, ())) or None,
                                student_arg=self.student_arg)
        return report.challenges[0]


def _notebook(arg: str | None):
    """(module, path) when ``--validator-student`` names a notebook or a folder of them; a usage error when it
    cannot be read."""
    from validator.notebook import NotebookError, find_target, load

    target = find_target(arg)
    if target is None:
        return None
    try:
        return load(target, name=target.name if target.is_file() else None), target
    except NotebookError as exc:
        raise pytest.UsageError(f"--validator: {exc}") from None


def _seed(config: pytest.Config, challenges: list[str]) -> int:
    """The run's seed: given, the xdist controller's, or drawn; in a handout, one it recorded (as submit-build)."""
    from validator.api import UsageError, handout_seeds

    workerinput = getattr(config, "workerinput", None)
    if workerinput and _SEED_KEY in workerinput:
        return int(workerinput[_SEED_KEY])
    given = config.getoption("--validator-seed")
    recorded = handout_seeds(challenges=challenges)
    if recorded and given is not None and given not in recorded:
        raise UsageError(f"this handout holds reference results for seeds {', '.join(map(str, recorded))} only; "
                         f"--validator-seed {given} is not one of them")
    if given is not None:
        return given
    return random.SystemRandom().choice(recorded) if recorded else random.SystemRandom().randrange(2**31)


_RUN = pytest.StashKey[_Run]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "validator_check(kind): a check of the LLM-layer validator, by kind")
    if _enabled(config):
        run = config.stash[_RUN] = _Run(config)
        # Grade the student's code only: without paths on the command line pytest would collect the
        # project's testpaths (or the whole folder) too. Paths that were named are collected as asked.
        target = str(run.target)
        if config.args_source != pytest.Config.ArgsSource.ARGS:
            config.args[:] = [target]
        elif target not in config.args:
            config.args.append(target)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: absent without it
def pytest_configure_node(node) -> None:  # pytest-xdist: every worker grades with the controller's seed
    run = node.config.stash.get(_RUN, None)
    if run is not None:
        node.workerinput[_SEED_KEY] = run.seed


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    run = config.stash.get(_RUN, None)
    if run is None:
        return None
    shown = run.notebook[1] if run.notebook is not None else run.student_file
    return [f"validator: {shown} · seed {run.seed} · profile {run.profile} "
            f"(replay with --validator-seed {run.seed})"]


class ValidatorFailure(Exception):
    """A check that failed or errored: its message and reproduce line are the report's."""


class CheckItem(pytest.Item):
    def __init__(self, *, challenge: str, check: str, kind: str, title: str, **kwargs):
        super().__init__(**kwargs)
        self.challenge, self.check, self.kind, self.title = challenge, check, kind, title
        self.add_marker(pytest.mark.validator_check(kind))

    def runtest(self) -> None:
        from validator.reporters.figures import figure_lines

        run = self.config.stash[_RUN]
        challenge, result = run.result(self.challenge, self.check)
        if result is None:
            if challenge.problem:
                raise ValidatorFailure(challenge.problem)
            pytest.skip("not graded in this run")
        self.user_properties.append(("score", f"{result.score:g}/{result.max_score:g}"))
        if result.status in ("failed", "error"):
            text = f"{result.status.upper()} {result.id} ({result.kind}): {result.title}\n{result.message}"
            text += "".join("\n" + line for line in figure_lines(result.figures))
            if result.reproduce:
                text += f"\nreproduce: {result.reproduce}"
            raise ValidatorFailure(text)
        if result.status == "skipped":
            pytest.skip(result.message or "skipped")

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ValidatorFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.challenge}::{self.check}"


class LayersFile(pytest.File):
    """The student's layers.py (or a package's mapping file) as a collector of check items; never imported."""

    def collect(self):
        run = self.config.stash[_RUN]
        for challenge in run.challenges_selected:
            for check in challenge.checks:
                yield CheckItem.from_parent(self, name=f"{challenge.id}::{check.id}", challenge=challenge.id,
                                            check=check.id, kind=check.kind, title=check.title)
            for question in challenge.questions:
                yield CheckItem.from_parent(self, name=f"{challenge.id}::question_{question.id}",
                                            challenge=challenge.id, check=f"question_{question.id}",
                                            kind="question", title=question.prompt.strip().splitlines()[0])


def _is_target(config: pytest.Config, path: Path) -> bool:
    run = config.stash.get(_RUN, None)
    return run is not None and Path(path).resolve() == run.target


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makemodule(module_path: Path, parent):
    """The student's layers.py collects check items: pytest never imports it (it runs in the worker)."""
    if _is_target(parent.config, module_path):
        return LayersFile.from_parent(parent, path=module_path)
    return None


def pytest_collect_file(file_path: Path, parent):
    """A package's mapping file (pyproject.toml, or --map's) collects its check items; a .py is made above."""
    if file_path.suffix != ".py" and _is_target(parent.config, file_path):
        return LayersFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Remember which checks survived selection, so each challenge grades only those (and their requirements)."""
    run = session.config.stash.get(_RUN, None)
    if run is None:
        return
    specs = {c.id: c for c in run.challenges_selected}
    for item in session.items:
        if isinstance(item, CheckItem):
            wanted = run.selected.setdefault(item.challenge, set())
            wanted.add(item.check)
    for challenge_id, wanted in run.selected.items():
        checks = {c.id: c for c in specs[challenge_id].checks}
        stack = [c for c in wanted if c in checks]
        while stack:
            for req in checks[stack.pop()].requires:
                if req not in wanted:
                    wanted.add(req)
                    stack.append(req)
        questions = {f"question_{q.id}" for q in specs[challenge_id].questions}
        if wanted & questions or set(checks) <= wanted:
            run.selected[challenge_id] = set()  # grade as submit-build does: questions are graded with all checks


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # pytest-xdist, on the controller: a worker's graded challenges
    run = node.config.stash.get(_RUN, None)
    data = getattr(node, "workeroutput", {}).get(_REPORTS_KEY)
    if run is not None and data:
        from validator.batch.reports import report_from_dict

        for challenge in report_from_dict(json.loads(data)).challenges:
            run.reports.setdefault(challenge.id, challenge)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """``--validator-html``: an xdist worker hands what it graded to the controller, which writes the page."""
    config = session.config
    run = config.stash.get(_RUN, None)
    if run is None or not run.html:
        return
    from validator.results import Report

    if hasattr(config, "workeroutput"):
        graded = Report(challenges=list(run.reports.values()), seed=run.seed, student=str(run.student_file),
                        profile=run.profile)
        config.workeroutput[_REPORTS_KEY] = json.dumps(graded.to_dict())
        return
    from validator.reporters.html import write_html

    order = [c.id for c in run.challenges_selected]
    challenges = sorted(run.reports.values(), key=lambda ch: order.index(ch.id) if ch.id in order else len(order))
    write_html(Report(challenges=challenges, seed=run.seed, student=str(run.student_file), profile=run.profile,
                      duration_s=time.perf_counter() - run.started), run.html)
