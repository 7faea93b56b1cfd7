"""A Jupyter notebook graded in place: its code cells become the module the worker imports.

Students of notebook courses write ``Embedding`` in a cell, between cells that explore:
they print shapes, plot, run a training loop, build a dataloader over a text file. This
module turns a notebook (``.ipynb``, or a ``.py`` notebook paired by jupytext) into one
Python module, ``layers.py``, that the worker imports and the integrity scan reads
exactly as it reads a student's own ``layers.py``, plus a map from each of its lines
back to a cell and a line of that cell, so that every message names the cell.

What runs when graded (the same rules for every cell; ``docs/notebooks.md`` has examples):

- *Definitions run, exploration does not.* Of each code cell's top-level statements only
  imports, ``def``, ``class`` and assignments of constants (literals and names defined
  above, arithmetic, a few pure calls such as ``math.sqrt`` or ``torch.device``) are kept,
  in notebook order; ``if``/``try`` blocks are kept when everything in them is. Prints,
  plots, loops, ``with open(...)``, calls that build objects (``model = GPT(cfg)``,
  ``loader = create_dataloader_v1(...)``) are exploration and are not run. A definition
  that needs, when it is defined, a name only exploration sets (a default argument, a
  base class) is not kept either, and a note says why.
- *Instructor tags* override the rule for a cell: ``validator-export`` (or an nbdev
  ``#| export`` line, as TinyTorch's ``*_dev.py`` files have) runs the whole cell as
  written; ``validator-skip`` runs none of it; nbgrader's autograder test cells
  (``grade: true, solution: false``) are tests, not definitions, and are not run;
  ``validator-answers`` marks the cell holding the answers (below).
- *IPython syntax*: a line magic or shell escape (``%matplotlib inline``, ``!pip install``,
  ``x = !ls``, ``obj?``) is dropped, with one note per notebook; a cell that starts with a
  cell magic (``%%time``) is not run. ``%run other.ipynb`` (or ``.py``) at the top level of a
  cell is followed as the kernel follows it: the other notebook's cells are graded there,
  under the same rules (only files inside the graded folder; no links, no cycles).
- *Failures cost only what they touch.* Each import is guarded: one the grader cannot
  satisfy (``tiktoken``, a module of an earlier part of the course) binds a stand-in that
  raises ``ImportError``, saying which cell imported it, when code uses it; the rest is
  graded. Each cell's kept code is guarded too: a cell that raises when it is run leaves
  out what it would have defined after that line, and nothing else. Both are reported as
  notes (sent back by the worker, ``__validator_notes__``). A cell that does not parse is
  not run, with a note naming its line.

The answers to the conceptual questions may live in the notebook: a cell tagged
``validator-answers`` holds the YAML of ``answers.yaml``, as a raw or Markdown cell, or as
a code cell assigning it to a name as a string (``ANSWERS = \"\"\"...\"\"\"``, so the cell
runs in a kernel and ``validator.check(..., answers=ANSWERS)`` can use it).

A folder of notebooks is graded as one module: each notebook in name order, as if run one
after the other in one kernel. Reading needs nothing beyond the standard library for a
version-4 ``.ipynb`` (the format is JSON); a ``.py`` notebook needs ``jupytext`` and a
pre-version-4 notebook ``nbformat`` (``pip install 'llm-layer-grader[notebook]'``).
"""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import re
import shlex
import shutil
import symtable
import tempfile
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file
from validator.reachability import dotted_name

SUFFIX = ".ipynb"
MAX_NOTEBOOK_BYTES = 32 << 20  # outputs (plots, images) make notebooks large; only their code is kept
MAX_NOTEBOOKS = 20  # in one folder, and notebooks followed through %run, together
MAX_HELPER_FILES = 20
MAX_RUN_DEPTH = 8
MAX_NOTES = 30
GENERATED = "layers.py"  # the generated module's name, in the staging folder and in the sandbox
HELPER = "_validator_notebook.py"
TAG_EXPORT, TAG_SKIP, TAG_ANSWERS = "validator-export", "validator-skip", "validator-answers"
INDENT = " " * 8  # a whole tab stop: a prefix that keeps tab-indented cells' indentation consistent
EXTRA_HINT = "pip install 'llm-layer-grader[notebook]' (or pip install nbformat jupytext)"

# Calls allowed in a constant's value: pure functions of their arguments, cheap, with no I/O.
PURE_BUILTINS = frozenset("""abs all any bool bytes chr complex dict divmod enumerate filter float format frozenset
    hash int isinstance issubclass len list map max min object ord pow range repr reversed round set slice sorted
    str sum tuple type zip property staticmethod classmethod""".split())
PURE_PREFIXES = ("math.", "cmath.", "operator.", "typing.", "typing_extensions.", "collections.", "enum.",
                 "dataclasses.field", "functools.partial", "logging.getLogger", "string.", "torch.device",
                 "torch.finfo", "torch.iinfo", "torch.Size", "torch.dtype")
_MODULE_NAMES = frozenset({"__name__", "__file__", "__doc__", "__spec__", "__loader__", "__package__",
                           "__builtins__", "__annotations__"})
_TRY_NODES = tuple(t for t in (ast.Try, getattr(ast, "TryStar", None)) if t is not None)

HELPER_SOURCE = '''"""Written by the grader beside a notebook's generated module (see validator/notebook.py).

What an import that failed, or a cell that raised, leaves behind when the module is imported:
a stand-in for each name the import would have bound, and a note for the report. The notes
name lines of the generated module, which the grader maps back to cells.
"""

NOTES = []


class Unavailable:
    """Stands for a name an import could not bind: using it raises ImportError, saying where and why."""

    def __init__(self, message):
        self._validator_message = message

    def __getattr__(self, name):
        raise ImportError(self._validator_message)

    def __call__(self, *args, **kwargs):
        raise ImportError(self._validator_message)

    def __getitem__(self, key):
        raise ImportError(self._validator_message)

    def __repr__(self):
        return "<unavailable: " + self._validator_message + ">"


def missing(name, statement, where, error):
    why = type(error).__name__ + ": " + str(error)[:300]
    note = where + ": `" + statement + "` failed when graded (" + why + "): skipped; only code that uses "
    if not any(n.startswith(where + ": `") for n in NOTES):
        NOTES.append(note + name + " fails")
    else:
        NOTES[:] = [n[:-6] + ", " + name + " fails" if n.startswith(where + ": `") else n for n in NOTES]
    return Unavailable(name + " is not available where the notebook is graded (" + where + ": `" + statement
                       + "` failed: " + why + ")")


def cell_failed(error):
    tb = error.__traceback__
    line = tb.tb_lineno if tb is not None else 0
    here = tb.tb_frame.f_code.co_filename if tb is not None else None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == here:
            line = tb.tb_lineno
        tb = tb.tb_next
    NOTES.append("layers.py:" + str(line) + ": raised " + type(error).__name__ + ": " + str(error)[:300]
                 + " when graded; the rest of that cell is not run, so what it defines after that line is missing")
'''


class NotebookError(Exception):
    """A notebook that cannot be graded at all; the message says which file and why."""


@dataclass(frozen=True)
class Cell:
    """One cell as read from a notebook (or one input of a kernel's history)."""

    kind: str  # "code", "markdown" or "raw"
    source: str
    label: str  # how messages name it: "work.ipynb, cell 7 (In [5])", or "In [5]" for a kernel's history
    notebook: str = ""  # the notebook it belongs to ("work.ipynb"; "this kernel" for a kernel's history)
    tags: tuple[str, ...] = ()
    nbgrader_test: bool = False  # an nbgrader autograder test cell (grade: true, solution: false)
    base: str | None = None  # the folder %run paths are relative to


# -- reading --------------------------------------------------------------------------------------------
def is_notebook_file(path: str | os.PathLike) -> bool:
    """An ``.ipynb``, or a ``.py`` whose header says jupytext pairs it with a notebook."""
    path = Path(path)
    if path.suffix == SUFFIX:
        return True
    if path.suffix != ".py" or not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return False
    return _is_jupytext(head)


def _is_jupytext(text: str) -> bool:
    return re.match(r"\A(?:#![^\n]*\n)?(?:#[^\n]*coding[^\n]*\n)?# ---[ \t]*\n(?:#[^\n]*\n){0,40}?#\s+jupytext:",
                    text) is not None


def notebooks_in(folder: str | os.PathLike) -> list[Path]:
    """The notebooks a folder holds, in name order: ``*.ipynb``, and ``.py`` notebooks not paired with one.

    Hidden files (``.ipynb_checkpoints``, a kernel's scratch) are not notebooks of the submission.
    """
    folder = Path(folder)
    found = sorted(p for p in folder.glob("*" + SUFFIX) if not p.name.startswith("."))
    stems = {p.stem for p in found}
    found += sorted(p for p in folder.glob("*.py") if not p.name.startswith(".") and p.stem not in stems
                    and p.name != HELPER and is_notebook_file(p))
    return sorted(found, key=lambda p: p.name)


def find_target(student: str | os.PathLike | None) -> Path | None:
    """What ``--student`` names, when it is to be graded as notebooks: a notebook file, or a folder that
    holds notebooks and no ``layers.py``; None otherwise (a layers.py, a package: graded as before)."""
    if not student:
        return None
    path = Path(student)
    if path.is_dir():
        return path if not (path / "layers.py").exists() and notebooks_in(path) else None
    return path if path.suffix == SUFFIX or is_notebook_file(path) else None


def read_cells(path: str | os.PathLike, *, name: str | None = None) -> list[Cell]:
    """The cells of a notebook file; :class:`NotebookError` when it cannot be read as one."""
    path = Path(path)
    name = name or path.name
    try:
        raw = read_submission_file(path, cap=MAX_NOTEBOOK_BYTES, what=name)
    except IntakeError as exc:
        raise NotebookError(str(exc)) from None
    base = str(path.parent)
    if path.suffix == ".py":
        return _read_jupytext(raw, name, base)
    return _read_ipynb(raw, name, base)


def _read_ipynb(raw: bytes, name: str, base: str | None) -> list[Cell]:
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise NotebookError(f"{name} is not a notebook: it is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name} is not a valid notebook: invalid JSON at line {exc.lineno}, column "
                            f"{exc.colno}: {exc.msg} (was it saved completely? open it in Jupyter and save it "
                            "again)") from None
    except RecursionError:
        raise NotebookError(f"{name} is not a valid notebook: its JSON is nested too deeply") from None
    if not isinstance(doc, dict) or "cells" not in doc and "worksheets" not in doc:
        raise NotebookError(f"{name} is not a notebook: its JSON has no `cells` list")
    major = doc.get("nbformat")
    if major != 4:
        doc = _upgrade(doc, major, name)
    cells = doc.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{name} is not a valid notebook: `cells` must be a list")
    out = []
    for i, cell in enumerate(cells, 1):
        if not isinstance(cell, dict):
            raise NotebookError(f"{name}, cell {i}: not a cell (a JSON object was expected)")
        kind = cell.get("cell_type")
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(s, str) for s in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"{name}, cell {i}: `source` must be a string or a list of strings")
        metadata = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
        tags = metadata.get("tags") if isinstance(metadata.get("tags"), list) else []
        grader = metadata.get("nbgrader") if isinstance(metadata.get("nbgrader"), dict) else {}
        count = cell.get("execution_count")
        label = f"{name}, cell {i}" + (f" (In [{count}])" if isinstance(count, int) and kind == "code" else "")
        out.append(Cell(kind=str(kind), source=source, label=label, notebook=name, tags=tuple(str(t) for t in tags),
                        nbgrader_test=bool(grader.get("grade")) and not grader.get("solution"), base=base))
    return out


def _upgrade(doc: dict, major: Any, name: str) -> dict:
    """A notebook older than version 4, converted by nbformat (which is then needed)."""
    if not isinstance(major, int) or not 1 <= major <= 3:
        raise NotebookError(f"{name}: nbformat version {major!r} is not one this grader reads (4, or 1 to 3 with "
                            "nbformat installed)")
    try:
        import nbformat
    except ImportError:
        raise NotebookError(f"{name} is an nbformat {major} notebook: reading it needs nbformat ({EXTRA_HINT}), "
                            "or open it in Jupyter and save it, which writes version 4") from None
    try:
        node = nbformat.reads(json.dumps(doc), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat's errors vary by version
        raise NotebookError(f"{name}: cannot convert this nbformat {major} notebook: {exc}") from None
    return json.loads(nbformat.writes(node))


def _read_jupytext(raw: bytes, name: str, base: str | None) -> list[Cell]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise NotebookError(f"{name} is not UTF-8 text") from None
    try:
        import jupytext
    except ImportError:
        raise NotebookError(f"{name} is a notebook paired by jupytext (its header says so): reading it needs "
                            f"jupytext ({EXTRA_HINT}), or grade its .ipynb instead") from None
    try:
        node = jupytext.reads(text, fmt="py")
    except Exception as exc:  # noqa: BLE001 - jupytext's parse errors vary
        raise NotebookError(f"{name} cannot be read as a jupytext notebook: {type(exc).__name__}: {exc}") from None
    doc = json.loads(json.dumps(node, default=lambda o: dict(o)))
    doc.setdefault("nbformat", 4)
    return _read_ipynb(json.dumps(doc).encode("utf-8"), name, base)


# -- the module ------------------------------------------------------------------------------------------
Origin = tuple[str, int]  # (cell label, line in that cell)


@dataclass
class NotebookModule:
    """The module generated from one or more notebooks, and how to name its lines in messages."""

    name: str  # how messages name what was graded: "work.ipynb", or "the notebooks in subs/alice"
    source: str
    origins: list[Origin | None]  # generated line i+1 -> where it comes from (None: the grader's prelude)
    notes: list[str] = field(default_factory=list)
    answers: dict[str, dict[str, Any]] | None = None  # from a cell tagged validator-answers
    answers_where: str | None = None
    defined: list[str] = field(default_factory=list)  # top-level classes and functions, in order
    code_cells: int = 0
    graded_cells: int = 0  # code cells with at least one statement that runs when graded
    folder: Path | None = None  # where helper modules beside the notebook are read from
    plural: bool = False
    runtime: list[str] = field(default_factory=list)  # what the module said when the worker imported it
    kernel: bool = False  # a Jupyter kernel's history (validator/jupyter.py): replayed with validator.check(...)

    # -- naming ----------------------------------------------------------------------------
    def where(self, line: int) -> str | None:
        """``work.ipynb, cell 7 (In [5]), line 3`` for a line of the generated module."""
        if 1 <= line <= len(self.origins) and self.origins[line - 1] is not None:
            label, at = self.origins[line - 1]
            return f"{label}, line {at}"
        return None

    def remap_text(self, text: str) -> str:
        """A message about the generated module, reworded to name cells and the notebook."""
        if not text or GENERATED not in text:
            return text

        def at(match: re.Match) -> str:
            found = self.where(int(match.group(1)))
            return found if found is not None else match.group(0)

        text = _TRACEBACK_LINE.sub(lambda m: f'File "{self.where(int(m.group(1))) or m.group(0)}"', text)
        text = _FILE_LINE.sub(at, text)
        verb = "define" if self.plural else "defines"
        text = text.replace(f"{GENERATED} defines no", f"{self.name} {verb} no")
        return _BARE_NAME.sub(self.name, text)

    def remap_result(self, result: Any) -> Any:
        """A ChallengeResult, its problem and every check's message and review reworded (in place)."""
        if result.problem:
            result.problem = self.remap_text(result.problem)
        for check in result.checks:
            check.message = self.remap_text(check.message)
            check.review = [self.remap_text(r) for r in check.review]
            if check.kind == "question" and check.message.startswith(_UNANSWERED):
                check.message = "not answered: " + (
                    "pass validator.check(..., answers=ANSWERS), the YAML of answers.yaml" if self.kernel else
                    f"add it to the notebook's answers cell (a cell tagged {TAG_ANSWERS}, holding the YAML of "
                    "answers.yaml), or to answers.yaml beside the notebook")
        return result

    def note_import(self, worker: Any) -> dict | None:
        """Import the module in ``worker`` (a :class:`validator.worker.client.Worker`) now and keep what it
        says about failed imports and raising cells; grading then reuses that import. Returns the reply."""
        from validator.worker.client import WorkerFailure

        try:
            reply = worker.load()
        except WorkerFailure:
            return None  # grading retries the import and reports what went wrong
        self.runtime = runtime_notes(reply)
        return reply

    def finish(self, report: Any, *, student: str) -> Any:
        """The report as the student should read it: cells named, the notebook's notes added."""
        for challenge in report.challenges:
            self.remap_result(challenge)
            if self.kernel:
                for check in challenge.checks:
                    check.reproduce = kernel_reproduce(check.reproduce)
        report.student = student
        report.notes = self.all_notes() + [self.remap_text(n) for n in report.notes]
        return report

    def all_notes(self) -> list[str]:
        notes = list(self.notes) + [self.remap_text(str(n)) for n in self.runtime]
        if len(notes) > MAX_NOTES:
            notes = notes[:MAX_NOTES] + [f"... and {len(notes) - MAX_NOTES} more notes about the notebook"]
        return notes

    def summary(self) -> str:
        """One line for the report's header: what of the notebook runs when graded."""
        return (f"{self.name}: {self.graded_cells} of {self.code_cells} code cells define what is graded "
                "(imports, classes, functions, constants); prints, plots, loops and the rest only explore "
                "and are not run")

    # -- staging ---------------------------------------------------------------------------
    def files(self, folder: str | os.PathLike) -> dict[str, str]:
        """Write the generated module, the grader's helper and the notebook's helper modules into ``folder``.

        Returns ``scratch name -> file``, what a sandbox copies in. Helper modules are the ``.py`` files
        beside the notebook (not notebooks), read under the intake's rules, at most MAX_HELPER_FILES.
        """
        folder = Path(folder)
        staged: dict[str, str] = {}
        if self.folder is not None:
            helpers = sorted(p for p in self.folder.glob("*.py") if p.name not in (GENERATED, HELPER)
                             and not p.name.startswith(".") and not p.is_symlink() and not is_notebook_file(p))
            for path in helpers[:MAX_HELPER_FILES]:
                try:
                    data = read_submission_file(path, cap=MAX_SOURCE_BYTES)
                except IntakeError:
                    continue  # importing it fails in the worker, with its name
                (folder / path.name).write_bytes(data)
                staged[path.name] = str(folder / path.name)
        for name, text in ((GENERATED, self.source), (HELPER, HELPER_SOURCE)):
            (folder / name).write_text(text, encoding="utf-8")
            staged[name] = str(folder / name)
        return staged

    @contextmanager
    def staged(self) -> Iterator[Path]:
        """A temporary folder holding the module (see :meth:`files`); yields its ``layers.py``."""
        folder = Path(tempfile.mkdtemp(prefix="validator-notebook-"))
        try:
            self.files(folder)
            yield folder / GENERATED
        finally:
            shutil.rmtree(folder, ignore_errors=True)


_UNANSWERED = "not answered: add it to answers.yaml"
_FILE_LINE = re.compile(r"(?<![\w.-])(?:[^\s\"'`(]*/)?" + re.escape(GENERATED) + r":(\d+)")
_TRACEBACK_LINE = re.compile(r'File "(?:[^"]*/)?' + re.escape(GENERATED) + r'", line (\d+)')
_BARE_NAME = re.compile(r"(?<![\w/.-])" + re.escape(GENERATED) + r"\b(?!:\d)")


def kernel_reproduce(command: str | None) -> str | None:
    """A submit-build reproduce line as the call that replays it from a notebook: ``validator.check(...)``."""
    if not command or not command.startswith("validator submit-build"):
        return command
    try:
        words = shlex.split(command)[2:]
    except ValueError:
        return command
    options: dict[str, list[str]] = {}
    for flag, value in zip(words[::2], words[1::2]):
        options.setdefault(flag.lstrip("-"), []).append(value)
    args = [repr(c) for c in options.get("challenge", [])]
    if options.get("check"):
        args.append(f"checks={options['check']!r}")
    if options.get("seed"):
        args.append(f"seed={options['seed'][0]}")
    if options.get("profile"):
        args.append(f"profile={options['profile'][0]!r}")
    return f"validator.check({', '.join(args)})"


def runtime_notes(load_reply: dict | None) -> list[str]:
    """The notes the generated module left when the worker imported it (failed imports, raising cells)."""
    notes = (load_reply or {}).get("notes")
    return [str(n)[:600] for n in notes[:MAX_NOTES]] if isinstance(notes, list) else []


# -- loading ----------------------------------------------------------------------------------------------
def load(target: str | os.PathLike, *, name: str | None = None) -> NotebookModule:
    """The module for a notebook file, or for every notebook of a folder (in name order).

    A single notebook that cannot be read is a :class:`NotebookError`. In a folder, one that cannot
    be read is a note and the others are graded; only a folder where none can be read is an error.
    """
    target = Path(target)
    if target.is_dir():
        paths = notebooks_in(target)
        if not paths:
            raise NotebookError(f"{target} holds no notebook (*.ipynb) and no layers.py")
        errors: list[str] = []
        cells: list[Cell] = []
        for path in paths[:MAX_NOTEBOOKS]:
            try:
                cells += read_cells(path)
            except NotebookError as exc:
                errors.append(str(exc))
        readable = min(len(paths), MAX_NOTEBOOKS) - len(errors)
        if not readable:
            raise NotebookError("; ".join(errors) if len(errors) == 1 else
                                f"no notebook in {target} can be read: " + "; ".join(errors))
        notes = [f"{e}: not graded (the other notebooks are)" for e in errors]
        if len(paths) > MAX_NOTEBOOKS:
            notes.append(f"only the first {MAX_NOTEBOOKS} notebooks (in name order) are graded")
        module = convert(cells, name=name or f"the notebooks in {target}", root=target)
        module.notes[:0] = notes
        module.plural = readable > 1
        return module
    if not target.exists() and not target.is_symlink():
        raise NotebookError(f"no notebook at {target}")
    return convert(read_cells(target), name=name or target.name, root=target.parent)


def convert(cells: list[Cell], *, name: str, root: str | os.PathLike | None = None) -> NotebookModule:
    """The module that grading a notebook's ``cells`` imports; ``root`` bounds the files %run may read."""
    builder = _Builder(name, Path(root).resolve() if root is not None else None)
    builder.cells(cells, depth=0, stack=())
    return builder.finish()


# -- building -----------------------------------------------------------------------------------------------
@dataclass
class _Unit:
    """One cell's parsed code: its lines (magics replaced) and the lines that start inside a string."""

    cell: Cell
    lines: list[str]  # 1-based by index + 1
    plain: set[int]  # lines inside a multi-line string: never re-indented
    export: bool = False


@dataclass
class _Item:
    """A top-level statement, in notebook order, and whether it runs when graded."""

    unit: _Unit
    node: ast.stmt
    keep: bool = False
    chunk: int = 0  # statements of one chunk share a guard: a cell, or its part between two %run lines


class _Builder:
    """Collects every cell's statements (following %run), chooses what runs, then writes the module.

    Chosen in two passes. First what is needed: imports, ``def`` and ``class`` always, and an
    assignment when a kept definition uses a name it binds (a helper such as ``_LOOKUP =
    getattr(F, "embedding")`` runs as it would in layers.py; ``loader = DataLoader(...)`` used by no
    definition does not), transitively. Then, in notebook order, what can run: a definition whose
    defaults, bases or decorators need a name nothing kept above binds is left out, with a note.
    """

    def __init__(self, name: str, root: Path | None):
        self.name = name
        self.root = root
        self.items: list[_Item] = []
        self.chunk = 0
        self.notes: list[str] = []
        self.magics: dict[str, list[tuple[str, str]]] = {}  # notebook -> [(cell label, text)]
        self.code_cells = 0
        self.answers: dict | None = None
        self.answers_where: str | None = None
        self.runs = 0
        # the ordered pass
        self.bound: set[str] = set(dir(builtins)) | set(_MODULE_NAMES)
        self.user: set[str] = set()  # names the notebook's kept code binds (shadowing builtins)
        self.exploration: set[str] = set()  # names only dropped statements bind
        self.aliases: dict[str, str] = {}  # import-bound name -> dotted module path
        self.star = False  # a kept star import: which names exist is unknown
        self.future_annotations = False

    # -- collecting ---------------------------------------------------------------------------
    def cells(self, cells: list[Cell], *, depth: int, stack: tuple[str, ...]) -> None:
        for cell in cells:
            if TAG_ANSWERS in cell.tags:
                self.read_answers(cell)
                continue
            if cell.kind != "code":
                continue
            self.code_cells += 1
            if TAG_SKIP in cell.tags or cell.nbgrader_test or not cell.source.strip():
                continue
            self.cell(cell, depth=depth, stack=stack)

    def cell(self, cell: Cell, *, depth: int, stack: tuple[str, ...]) -> None:
        text = cell.source.replace("\r\n", "\n").replace("\r", "\n")
        first = next((line for line in text.split("\n") if line.strip()), "")
        if first.lstrip().startswith("%%"):
            self.notes.append(f"{cell.label}: a cell that starts with the cell magic `{first.strip()[:40]}` is not "
                              "run when graded; move what it defines into a cell of its own")
            return
        parsed = _parse_cell(text)
        for _, magic in parsed.magics:
            self.magics.setdefault(cell.notebook or cell.label, []).append((cell.label, magic))
        if parsed.error is not None:
            line, message = parsed.error
            self.notes.append(f"{cell.label}, line {line}: {message}: the cell is not graded, so what it defines "
                              "is missing")
            return
        unit = _Unit(cell, parsed.text.split("\n"), _string_continuations(parsed.text),
                     export=TAG_EXPORT in cell.tags or _nbdev_export(text))
        self.chunk += 1
        for stmt in parsed.tree.body:
            run = parsed.runs.get(stmt.lineno) if isinstance(stmt, ast.Pass) else None
            if run is not None:
                self.follow_run(cell, stmt.lineno, run, depth=depth, stack=stack)
                self.chunk += 1
                continue
            self.items.append(_Item(unit, stmt, chunk=self.chunk))

    def follow_run(self, cell: Cell, line: int, arg: str, *, depth: int, stack: tuple[str, ...]) -> None:
        """``%run other.ipynb``: grade the other notebook's cells here, as the kernel runs them here."""
        where = f"{cell.label}, line {line}: `%run {arg}`"
        try:
            words = [w for w in shlex.split(arg) if not w.startswith("-")]
        except ValueError:
            words = []
        if not words or not words[0].endswith((SUFFIX, ".py")):
            self.notes.append(f"{where} is not followed when graded (only %run of a .ipynb or .py file is)")
            return
        base = Path(cell.base) if cell.base else Path.cwd()
        path = Path(os.path.normpath(base / words[0]))
        resolved = path.resolve()
        if self.root is None or (resolved != self.root and self.root not in resolved.parents):
            self.notes.append(f"{where} is not followed: only files in the graded folder are")
            return
        if str(resolved) in stack:
            self.notes.append(f"{where} is not followed again: it is already being run (a cycle of %run)")
            return
        if depth >= MAX_RUN_DEPTH or self.runs >= MAX_NOTEBOOKS:
            self.notes.append(f"{where} is not followed: too many notebooks run each other")
            return
        self.runs += 1
        try:
            if path.suffix == SUFFIX or is_notebook_file(path):
                cells = read_cells(path)
            else:
                raw = read_submission_file(path, cap=MAX_SOURCE_BYTES, what=path.name)
                cells = [Cell("code", raw.decode("utf-8", "replace"), path.name, notebook=path.name,
                              base=str(path.parent))]
        except (NotebookError, IntakeError) as exc:
            self.notes.append(f"{where} is not followed: {exc}")
            return
        self.cells(cells, depth=depth + 1, stack=stack + (str(resolved),))

    def read_answers(self, cell: Cell) -> None:
        from validator.intake import parse_answers

        text = _answers_text(cell)
        if text is None:
            self.notes.append(f"{cell.label} is tagged {TAG_ANSWERS} but holds no YAML: write the answers as in "
                              "answers.yaml (a raw cell, or ANSWERS = \"\"\"...\"\"\" in a code cell)")
            return
        try:
            answers = parse_answers(text, where=f"{cell.label} ({TAG_ANSWERS})")
        except IntakeError as exc:
            self.notes.append(f"{exc}; its questions earn nothing")
            return
        merged = self.answers or {}
        for cid, given in answers.items():
            merged.setdefault(cid, {}).update(given)
        self.answers = {cid: {qid: v["answer"] if isinstance(v, dict) and "answer" in v else v
                              for qid, v in qs.items()} for cid, qs in merged.items()}
        self.answers_where = cell.label

    # -- choosing -----------------------------------------------------------------------------------
    def choose(self) -> None:
        """Mark what runs: what the definitions need (first pass), then what can run in order (second)."""
        needed: set[str] = set()
        for item in self.items:
            if item.unit.export:
                needed |= {n.id for n in ast.walk(item.node) if isinstance(n, ast.Name)}
            elif isinstance(item.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                needed |= _definition_names(item.node, future_annotations=False)
                needed |= {name for name, _ in _global_uses(item.node, item.unit.lines)}
        defined = {item.node.name for item in self.items
                   if isinstance(item.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
        wanted: set[int] = set()
        changed = True
        while changed:
            changed = False
            for i, item in enumerate(self.items):
                node = item.node
                if i in wanted or not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) or node.value is None:
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                changes = {r for t in targets for r in _roots(t) if not isinstance(t, ast.Name)}
                if _stored_names(node) & needed or changes & (needed | defined) or (
                        isinstance(node, ast.AugAssign) and _roots(node.target) & needed):
                    wanted.add(i)
                    needed |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                    changed = True
        for i, item in enumerate(self.items):
            item.keep = item.unit.export or self.runnable(item, wanted=i in wanted)
            if item.keep:
                self.bind(item.node)
            else:
                self.exploration.update(_stored_names(item.node))

    def runnable(self, item: _Item, *, wanted: bool) -> bool:
        """Whether a statement runs when graded, given what the statements kept above it bind."""
        stmt, cell = item.node, item.unit.cell
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            missing = sorted(n for n in _definition_names(stmt, self.future_annotations) if not self.known(n))
            if missing:
                kind = "class" if isinstance(stmt, ast.ClassDef) else "def"
                only = [n for n in missing if n in self.exploration]
                why = (f"{_names(only)}, which only exploration code sets (it is not run when graded)" if only
                       else f"{_names(missing)}, defined nowhere above it")
                self.notes.append(f"{cell.label}, line {stmt.lineno}: `{kind} {stmt.name}` is not graded: defining "
                                  f"it uses {why}")
                return False
            return True
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            # a name the definitions use, or a change to one of them (``Embedding.forward = f``, ``CONFIG["x"] = 1``)
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            needs = _free_names(*targets, stmt.value) | (_roots(stmt.target) if isinstance(stmt, ast.AugAssign) else set())
            return wanted and stmt.value is not None and all(self.known(n) for n in needs)
        if isinstance(stmt, ast.If):
            return self.static(stmt.test) and self.all_static(stmt.body + stmt.orelse)
        if isinstance(stmt, _TRY_NODES):
            handlers = [h.type for h in stmt.handlers if h.type is not None]
            return all(self.static(h) for h in handlers) and self.all_static(
                stmt.body + [s for h in stmt.handlers for s in h.body] + stmt.orelse + stmt.finalbody)
        return False

    def all_static(self, body: list[ast.stmt]) -> bool:
        """A block (of an ``if`` or ``try``) of imports, definitions and constant assignments only."""
        saved = set(self.bound), set(self.user), dict(self.aliases), self.star
        ok = True
        for stmt in body:
            if isinstance(stmt, ast.Pass):
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                pass
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                ok = all(self.known(n) for n in _definition_names(stmt, self.future_annotations))
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                ok = all(_plain_target(t) for t in targets) and (stmt.value is None or self.static(stmt.value))
            elif isinstance(stmt, ast.If):
                ok = self.static(stmt.test) and self.all_static(stmt.body + stmt.orelse)
            else:
                ok = False
            if not ok:
                break
            self.bind(stmt)
        self.bound, self.user, self.aliases, self.star = saved
        return ok

    def static(self, expr: ast.expr) -> bool:
        """An expression that only computes a value: names defined above, pure calls, no I/O, no await.

        A lambda's body runs when it is called, not here: only its defaults count.
        """
        for node in _evaluated(expr):
            if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom)):
                return False
            if isinstance(node, ast.Call) and not self.pure_call(node):
                return False
        return all(self.known(n) for n in _free_names(expr))

    def pure_call(self, node: ast.Call) -> bool:
        dotted = dotted_name(node.func)
        if dotted is None:
            return False
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            full = self.aliases[head] + (f".{rest}" if rest else "")
            return any(full == p.rstrip(".") or (p.endswith(".") and full.startswith(p)) or full.startswith(p + ".")
                       for p in PURE_PREFIXES)
        return not rest and head in PURE_BUILTINS and head not in self.user

    def known(self, name: str) -> bool:
        return self.star or name in self.bound

    def bind(self, stmt: ast.stmt) -> None:
        """Record the names a kept statement binds (and, for imports, what they stand for)."""
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            self.future_annotations |= any(a.name == "annotations" for a in stmt.names)
        imported: dict[str, str] = {}
        for node in _top_nodes(stmt):
            if isinstance(node, ast.Import):
                imported.update((a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                                for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                self.star |= any(a.name == "*" for a in node.names)
                imported.update((a.asname or a.name, f"{'.' * (node.level or 0)}{node.module or ''}.{a.name}")
                                for a in node.names if a.name != "*")
        for name in _stored_names(stmt):
            self.bound.add(name)
            self.user.add(name)
            if name in imported:
                self.aliases[name] = imported[name]
            else:
                self.aliases.pop(name, None)

    # -- writing ------------------------------------------------------------------------------------------
    def finish(self) -> NotebookModule:
        self.choose()
        future: list[list[tuple[str, Origin | None]]] = []
        chunks: list[tuple[list[tuple[str, Origin | None]], list[_Item]]] = []
        i = 0
        while i < len(self.items):
            j = i
            while j < len(self.items) and self.items[j].chunk == self.items[i].chunk:
                j += 1
            kept = [item for item in self.items[i:j] if item.keep]
            future += [_segment(item.unit, item.node, "") for item in kept if _is_future(item.node)]
            body = [item for item in kept if not _is_future(item.node)]
            chunk = self.emit(body) if body else None
            if chunk is not None:
                chunks.append((chunk, body))
            i = j
        lines = self.assemble(future, chunks)
        defined = [item.node.name for _, body in chunks for item in body
                   if isinstance(item.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        graded = {body[0].unit.cell.label for _, body in chunks}
        self.note_magics()
        self.note_exploration_globals()
        source = "\n".join(text for text, _ in lines) + "\n"
        if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
            raise NotebookError(f"{self.name}: the code to grade is larger than {MAX_SOURCE_BYTES >> 20} MiB, the "
                                "limit for a submitted file")
        return NotebookModule(name=self.name, source=source, origins=[o for _, o in lines], notes=self.notes,
                              answers=self.answers, answers_where=self.answers_where,
                              defined=list(dict.fromkeys(defined)), code_cells=self.code_cells,
                              graded_cells=len(graded),
                              folder=self.root if self.root is not None and self.root.is_dir() else None)

    def assemble(self, future: list, chunks: list) -> list[tuple[str, Origin | None]]:
        """The module's lines; a chunk that compiles alone but not beside the others (``global x`` in one
        cell, ``x: int = 1`` in another) is left out with a note, so one cell never costs the module."""
        prelude = ("from _validator_notebook import NOTES as __validator_notes__, cell_failed as "
                   "_validator_cell_failed, missing as _validator_missing")
        while True:
            parts = [*future, [(prelude, None)], *(chunk for chunk, _ in chunks)]
            lines = [line for part in parts for line in part]
            try:
                compile("\n".join(text for text, _ in lines) + "\n", GENERATED, "exec", dont_inherit=True)
                return lines
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                at = getattr(exc, "lineno", None)
                index, start = None, 0
                for n, part in enumerate(parts):
                    if isinstance(at, int) and start < at <= start + len(part):
                        index = n
                        break
                    start += len(part)
                if index is None or index == len(future):  # nowhere, or the prelude: grade without the chunks
                    index = len(parts) - 1 if chunks else None
                if index is None:
                    return [(prelude, None)]
                origin = parts[index][max(0, min(len(parts[index]) - 1, (at or 1) - start - 1))][1]
                where = f"{origin[0]}, line {origin[1]}" if origin else self.name
                self.notes.append(f"{where}: {getattr(exc, 'msg', type(exc).__name__)}: the cell is not graded, so "
                                  "what it defines is missing")
                if index < len(future):
                    del future[index]
                else:
                    del chunks[index - len(future) - 1]

    def emit(self, body: list[_Item]) -> list[tuple[str, Origin | None]] | None:
        """One chunk under its cell's guard; None (with a note) when the importer would refuse it."""
        unit = body[0].unit
        label = unit.cell.label
        origin = (label, _first_line(body[0].node))
        chunk: list[tuple[str, Origin | None]] = [("try:", origin)]
        for item in body:
            if isinstance(item.node, (ast.Import, ast.ImportFrom)):
                chunk.extend(_guarded_import(item.unit, item.node))
            else:
                chunk.extend(_segment(item.unit, item.node, INDENT))
        chunk.append(("except Exception as _validator_error:", origin))
        chunk.append((INDENT + "_validator_cell_failed(_validator_error)", origin))
        try:  # what the importer would refuse (`await` outside async, duplicate arguments...) never reaches it
            compile("\n".join(text for text, _ in chunk) + "\n", GENERATED, "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            line = getattr(exc, "lineno", None)
            where = chunk[line - 1][1] if isinstance(line, int) and 1 <= line <= len(chunk) else None
            at = f"{where[0]}, line {where[1]}" if where else label
            self.notes.append(f"{at}: {getattr(exc, 'msg', exc)}: the cell is not graded, so what it defines is "
                              "missing")
            return None
        except (RecursionError, MemoryError):
            self.notes.append(f"{label}: too deeply nested to compile: the cell is not graded")
            return None
        return chunk

    def note_magics(self) -> None:
        for notebook, found in reversed(list(self.magics.items())):
            shown = ", ".join(f"`{text[:40]}`" for _, text in found[:3]) + (", ..." if len(found) > 3 else "")
            cells = list(dict.fromkeys(label.split(", ", 1)[-1] for label, _ in found))
            self.notes.insert(0, f"{notebook}: {len(found)} IPython magic or shell line{'s' if len(found) != 1 else ''}"
                                 f" ({shown}; {', '.join(cells[:6])}) {'are' if len(found) != 1 else 'is'} not run "
                                 "when graded")

    def note_exploration_globals(self) -> None:
        """A function that uses a global only exploration code sets fails when called: say so up front."""
        if self.star:
            return
        for item in self.items:
            if not item.keep or not isinstance(item.node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for name, line in _global_uses(item.node, item.unit.lines):
                if name not in self.bound and name in self.exploration:
                    self.notes.append(f"{item.unit.cell.label}, line {line}: {name} is set only by exploration "
                                      f"code, which is not run when graded, so `{item.node.name}` fails where it "
                                      "uses it; define it in a cell of its own")


def _is_future(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__"


def _guarded_import(unit: _Unit, stmt: ast.stmt) -> list[tuple[str, Origin | None]]:
    """An import under its own guard: if it fails, each name it binds stands for the failure."""
    origin = (unit.cell.label, _first_line(stmt))
    out: list[tuple[str, Origin | None]] = [(INDENT + "try:", origin)]
    out += _segment(unit, stmt, INDENT * 2)
    out.append((INDENT + "except Exception as _validator_error:", origin))
    where = f"{origin[0]}, line {origin[1]}"
    text = " ".join(" ".join(t.strip() for t, _ in _segment(unit, stmt, "")).split())
    statement = text if len(text) <= 80 else text[:77] + "..."
    if isinstance(stmt, ast.Import):
        binds = [a.asname or a.name.split(".")[0] for a in stmt.names]
    else:
        binds = [a.asname or a.name for a in stmt.names if a.name != "*"]
        if any(a.name == "*" for a in stmt.names):
            out.append((INDENT * 2 + f"_validator_missing('its names', {statement!r}, {where!r}, _validator_error)",
                        origin))
    for bound in binds:
        out.append((INDENT * 2 + f"{bound} = _validator_missing({bound!r}, {statement!r}, {where!r}, "
                                 "_validator_error)", origin))
    return out


# -- parsing a cell ----------------------------------------------------------------------------------------------
@dataclass
class _Parsed:
    text: str
    tree: ast.Module | None
    magics: list[tuple[int, str]]
    runs: dict[int, str]  # line -> the argument of a top-level %run
    error: tuple[int, str] | None


_MAGIC_ASSIGN = re.compile(r"^[\w.,\s()\[\]*]+=\s*[%!]")


def _is_magic(stripped: str) -> bool:
    return (stripped.startswith(("%", "!", "?")) or stripped.endswith("?") or _MAGIC_ASSIGN.match(stripped) is not None)


def _parse_cell(text: str) -> _Parsed:
    """Parse a cell as IPython would run it: magic and shell lines become ``pass`` (so lines keep their
    numbers); a leading indentation common to the cell is removed, as IPython does."""
    lines = text.split("\n")
    first = next((line for line in lines if line.strip()), "")
    lead = first[: len(first) - len(first.lstrip())]
    if lead and all(not line.strip() or line.startswith(lead) for line in lines):
        lines = [line[len(lead):] for line in lines]
    magics: list[tuple[int, str]] = []
    runs: dict[int, str] = {}
    for _ in range(len(lines) + 1):
        source = "\n".join(lines)
        try:
            tree = ast.parse(source)
        except SyntaxError as exc:
            n = exc.lineno
            if isinstance(n, int) and 1 <= n <= len(lines) and _is_magic(lines[n - 1].strip()):
                line = lines[n - 1]
                indent = line[: len(line) - len(line.lstrip())]
                stripped = line.strip()
                magics.append((n, stripped))
                if not indent and re.match(r"%run\s", stripped):
                    runs[n] = stripped[4:].strip()
                lines[n - 1] = indent + "pass"
                continue
            return _Parsed(source, None, magics, runs, (n or 0, f"{type(exc).__name__}: {exc.msg}"))
        except (ValueError, RecursionError, MemoryError) as exc:
            return _Parsed(source, None, magics, runs, (0, f"cannot be parsed ({type(exc).__name__})"))
        return _Parsed(source, tree, magics, runs, None)
    return _Parsed("\n".join(lines), None, magics, runs, (0, "cannot be parsed"))


def _nbdev_export(text: str) -> bool:
    """An nbdev / TinyTorch ``#| export`` (or ``# export``) directive among the cell's first lines."""
    for line in text.split("\n")[:5]:
        if re.match(r"^#\|?\s*export(s|i)?\b", line.strip()):
            return True
    return False


def _string_continuations(text: str) -> set[int]:
    """Lines that start inside a string literal spanning lines: indenting them would change the string."""
    plain: set[int] = set()
    starts: list[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            name = tokenize.tok_name.get(tok.type, "")
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
                plain.update(range(tok.start[0] + 1, tok.end[0] + 1))
            elif name == "FSTRING_START":
                starts.append(tok.start[0])
            elif name == "FSTRING_END" and starts:
                begin = starts.pop()
                plain.update(range(begin + 1, tok.end[0] + 1))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        pass
    return plain


def _first_line(stmt: ast.stmt) -> int:
    decorators = getattr(stmt, "decorator_list", None) or []
    return min([stmt.lineno] + [d.lineno for d in decorators])


def _segment(chunk: _Unit, stmt: ast.stmt, indent: str) -> list[tuple[str, Origin]]:
    """The statement's source lines, re-indented by ``indent`` (not inside strings), each with its origin.

    A simple statement sharing a line with another (``import torch; print(torch)``) is cut out by its
    columns; a compound one always owns its lines.
    """
    start, end = _first_line(stmt), stmt.end_lineno or stmt.lineno
    compound = hasattr(stmt, "body")
    out = []
    for n in range(start, end + 1):
        line = chunk.lines[n - 1]
        if not compound:
            data = line.encode("utf-8")
            lo = stmt.col_offset if n == start else 0
            hi = stmt.end_col_offset if n == end and stmt.end_col_offset is not None else len(data)
            line = data[lo:hi].decode("utf-8", "replace")
        out.append((line if n in chunk.plain else indent + line, (chunk.cell.label, n)))
    return out


def _answers_text(cell: Cell) -> str | None:
    """The YAML an answers cell holds: a string assigned in a code cell, or the text of a raw/Markdown cell."""
    text = cell.source
    if cell.kind == "code":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            return text if text.strip() else None
        for stmt in tree.body:
            value = getattr(stmt, "value", None)
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Constant) \
                    and isinstance(value.value, str):
                return value.value
        return None
    fenced = re.search(r"```(?:ya?ml)?\s*\n(.*?)```", text, re.DOTALL)
    text = fenced.group(1) if fenced else text
    return text if text.strip() else None


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names[:4]) + (" ..." if len(names) > 4 else "")


# -- names ---------------------------------------------------------------------------------------------------------
def _roots(node: ast.expr) -> set[str]:
    """The names an assignment target changes or binds: ``a.b[c] = ...`` changes ``a``."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_roots(e) for e in node.elts)) if node.elts else set()
    return set()


def _plain_target(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain_target(e) for e in node.elts)
    return isinstance(node, ast.Starred) and _plain_target(node.value)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.ListComp, ast.SetComp,
           ast.DictComp, ast.GeneratorExp)


def _top_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of a statement that run in the module's scope: not inside a function, class or comprehension
    (a def or class statement is itself such a node: it binds its name)."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, _SCOPES):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _evaluated(expr: ast.AST) -> Iterator[ast.AST]:
    """The nodes evaluated when an expression is: a lambda's defaults, never its body."""
    stack: list[ast.AST] = [expr]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.Lambda):
            stack.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)])
            continue
        stack.extend(ast.iter_child_nodes(node))


def _stored_names(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds in the module (assignments, loop targets, defs, imports)."""
    names: set[str] = set()
    for node in _top_nodes(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def _free_names(*exprs: ast.AST | None) -> set[str]:
    """Names an expression loads that it does not bind itself (comprehension targets, lambda parameters)."""
    loads: set[str] = set()
    local: set[str] = set()
    for expr in exprs:
        if expr is None:
            continue
        for node in _evaluated(expr):
            if isinstance(node, ast.Name):
                (loads if isinstance(node.ctx, ast.Load) else local).add(node.id)
            elif isinstance(node, ast.arg):
                local.add(node.arg)
    return loads - local


def _definition_names(stmt: ast.stmt, future_annotations: bool) -> set[str]:
    """The names a def or class needs when it is defined (decorators, defaults, annotations, bases, class body)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = stmt.args
        exprs: list[ast.AST | None] = [*stmt.decorator_list, *args.defaults, *args.kw_defaults]
        if not future_annotations:
            every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
            exprs += [a.annotation for a in every if a is not None] + [stmt.returns]
        return _free_names(*exprs)
    if isinstance(stmt, ast.ClassDef):
        exprs = [*stmt.decorator_list, *stmt.bases, *(k.value for k in stmt.keywords)]
        names = _free_names(*exprs)
        local: set[str] = set()
        for inner in stmt.body:
            if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names |= _definition_names(inner, future_annotations) - local
                local.add(inner.name)
            elif isinstance(inner, ast.AnnAssign) and future_annotations:
                names |= _free_names(inner.value) - local
                local |= _stored_names(inner)
            else:
                names |= _free_names(inner) - local
                local |= _stored_names(inner)
        return names
    return set()


def _global_uses(node: ast.AST, lines: list[str]) -> list[tuple[str, int]]:
    """(name, line) for each global name a function (or a class's methods) reads, first use first."""
    start, end = _first_line(node), node.end_lineno or node.lineno
    source = "\n".join(lines[start - 1:end])
    try:
        table = symtable.symtable(source, GENERATED, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names: set[str] = set()

    def walk(t: symtable.SymbolTable) -> None:
        for child in t.get_children():
            if child.get_type() == "function":
                names.update(s.get_name() for s in child.get_symbols() if s.is_global() and s.is_referenced())
            walk(child)

    walk(table)
    found: dict[str, int] = {}
    for inner in ast.walk(node):
        if isinstance(inner, ast.Name) and inner.id in names and isinstance(inner.ctx, ast.Load):
            found[inner.id] = min(found.get(inner.id, inner.lineno), inner.lineno)
    return sorted(found.items(), key=lambda kv: kv[1])


# -- grading ------------------------------------------------------------------------------------------------------
def grade_notebook(module: NotebookModule, *, student: str, answers: dict | None = None, **options: Any) -> Any:
    """Grade a converted notebook through :func:`validator.api.grade` (``options`` are its keywords) and
    return the report with cells named. ``answers`` default to the notebook's answers cell."""
    from validator.api import grade
    from validator.worker.client import Worker

    with module.staged() as module_file, Worker(module_file) as worker:
        worker.start()
        module.note_import(worker)
        report = grade(module_file, worker=worker, answers=module.answers if answers is None else answers,
                       **options)
    return module.finish(report, student=student)
