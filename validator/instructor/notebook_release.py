"""`validator release --out DIR --notebook`: one student notebook per challenge, graded from inside Jupyter.

Each ``DIR/notebooks/<id>.ipynb`` holds, as Markdown, the challenge's summary, background,
contract and hints (from its spec, like its page ``challenges/<id>.md``); the stub of its
classes and functions in a code cell (from ``student/layers.py``, so the signatures are the
contract's); a cell that ``%run``\\ s the notebooks of the challenges it builds on (found from
the names the reference's code uses, never its text); a scratch cell for exploring; the
questions with an answers cell (tagged ``validator-answers``, the YAML of ``answers.yaml``);
and a last cell, ``validator.check("<id>", answers=ANSWERS)``, that grades what the kernel
ran and shows the HTML report in its output (see :mod:`validator.jupyter`).

``--notebook-from NOTEBOOK`` starts from an instructor's own notebook instead, with solution
regions marked as nbgrader marks them (``### BEGIN SOLUTION`` / ``### END SOLUTION`` in code
cells, ``=== BEGIN MARK SCHEME ===`` / ``=== END MARK SCHEME ===`` in Markdown, and
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` for tests students must not see). A
region inside a function becomes ``raise NotImplementedError`` there; elsewhere it becomes a
``# YOUR CODE HERE`` comment (Markdown: "YOUR ANSWER HERE"). Outputs and execution counts are
cleared (they may show a solution's results), and a grading cell is added if the notebook
has none. Everything written is searched for the reference's solution lines, the answer
key's text and the instructor notebook's own solution lines; a leak removes the handout.

Needs nbformat (``pip install 'llm-layer-grader[notebook]'``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path
from typing import Any, Iterable, Mapping

from validator.instructor import stubgen
from validator.notebook import EXTRA_HINT, TAG_ANSWERS
from validator.spec import Challenge

SOLUTION = ("BEGIN SOLUTION", "END SOLUTION")
HIDDEN = ("BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
MARK_SCHEME = re.compile(r"=== BEGIN MARK SCHEME ===.*?=== END MARK SCHEME ===", re.DOTALL)
FOLDER = "notebooks"

NOTEBOOKS_README = """# Notebooks

One notebook per challenge. Open one in Jupyter (this folder's parent must be installed:
`pip install -e '..[notebook]'`, and `pip install jupyterlab` or use VS Code), write your code
in the stub's cell, explore in the cells you like, and run the last cell:
`validator.check("<id>", answers=ANSWERS)` grades what your kernel ran and shows the report
below it. Your code is graded in the grader's own process, never in your kernel, and only what
defines things (imports, classes, functions, constants) runs there: prints, plots and loops are
yours alone.

A notebook that builds on earlier challenges runs their notebooks first (`%run ./linear.ipynb`):
do those first. To grade from a terminal instead: `validator submit-build --student notebooks/`
(all of them) or `--student notebooks/<id>.ipynb` (one). Your answers to the questions are in
each notebook's answers cell.
"""


class NotebookReleaseError(Exception):
    """A notebook cannot be released; the message says which and why."""


def _nbformat():
    try:
        import nbformat
    except ImportError:
        raise NotebookReleaseError(f"writing notebooks needs nbformat: {EXTRA_HINT}") from None
    return nbformat


# -- a challenge's notebook -----------------------------------------------------------------------------
def stub_imports(stub: str) -> str:
    """The stub module's top-level import statements, as written."""
    tree = ast.parse(stub)
    lines = stub.splitlines()
    return "\n".join("\n".join(lines[n.lineno - 1:n.end_lineno]) for n in tree.body
                     if isinstance(n, (ast.Import, ast.ImportFrom)))


def dependencies(challenge: Challenge, reference_source: str, catalogue: Mapping[str, Challenge]) -> list[str]:
    """The challenges whose classes and functions this challenge's reference code uses (by name only)."""
    tree = ast.parse(reference_source)
    tops = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    owners = stubgen.challenge_of_names(catalogue)
    found: list[str] = []
    for entry in challenge.entries:
        node = tops.get(entry)
        if node is None:
            continue
        used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} & set(tops)
        for name in sorted(used - set(challenge.entries)):
            owner = owners.get(name)
            if owner and owner != challenge.id and owner not in found:
                found.append(owner)
    return found


def answers_cell_source(challenge: Challenge) -> str:
    """``ANSWERS = \"\"\"...\"\"\"``: the YAML of answers.yaml for this challenge's questions, prompts as comments."""
    out = ["# Your answers (YAML, as in answers.yaml): a letter for a choice question, a number otherwise.",
           f'{"ANSWERS"} = """', f"{challenge.id}:"]
    for q in challenge.questions:
        kind = "a letter: " + ", ".join(q.choices) if q.type == "choice" else "a number" + (
            f", in {q.unit}" if q.unit else "")
        out.append(f"  {q.id}:    # {kind}")
    out.append('"""')
    return "\n".join(out)


def _questions_markdown(challenge: Challenge) -> str:
    out = ["## Questions", "", "Answer in the next cell (the grader reads it; in a handout your answers are "
           "recorded and graded when you submit).", ""]
    for i, q in enumerate(challenge.questions, 1):
        out.append(f"{i}. **`{q.id}`** ({q.points:g} point{'s' if q.points != 1 else ''}): "
                   + " ".join(q.prompt.strip().split()))
        out += [f"   - `{letter}`: {' '.join(str(text).split())}" for letter, text in q.choices.items()]
    return "\n".join(out)


def challenge_notebook(challenge: Challenge, *, stub: str, deps: Iterable[str] = ()) -> Any:
    """The student notebook for one challenge (an nbformat node)."""
    nbf = _nbformat()
    v4 = nbf.v4
    c = challenge
    snippets = stubgen.entry_snippets(stub)
    missing = [n for n in c.entries if n not in snippets]
    if missing:
        raise NotebookReleaseError(f"{c.id}: the stub defines no {', '.join(missing)}")
    names = ", ".join(f"`{n}`" for n in c.entries)
    cells = [v4.new_markdown_cell("\n".join([
        f"# {c.title}", "", c.summary.strip(), "",
        f"Implement {names} in the code cell below, explore in the cells you add, then run the last cell: "
        f"it grades what this notebook's kernel ran and shows the report under it. The grader runs your "
        "definitions (imports, classes, functions, constants) in a process of its own; your prints, plots "
        "and loops are not run there."]))]
    if c.background:
        cells.append(v4.new_markdown_cell("## Background\n\n" + c.background.strip()))
    contract = ["## Contract", "", c.contract.strip()]
    if c.forbidden.source:
        contract += ["", "Not allowed in your code: " + ", ".join(f"`{a}`" for a in c.forbidden.source) + "."]
    cells.append(v4.new_markdown_cell("\n".join(contract)))
    deps = list(deps)
    if deps:
        cells.append(v4.new_code_cell(
            "# This challenge builds on your code from earlier notebooks: run them here first.\n"
            + "\n".join(f"%run ./{d}.ipynb" for d in deps)))
    code = stub_imports(stub) + "\n\n\n" + "\n\n\n".join(snippets[n] for n in c.entries)
    cells.append(v4.new_code_cell(code))
    cells.append(v4.new_markdown_cell("## Try it\n\nBuild your layer on small inputs, print shapes, plot its "
                                      "initial weights: none of this is graded."))
    cells.append(v4.new_code_cell("# explore here"))
    if c.questions:
        cells.append(v4.new_markdown_cell(_questions_markdown(c)))
        cells.append(v4.new_code_cell(answers_cell_source(c), metadata={"tags": [TAG_ANSWERS]}))
    if c.hints:
        cells.append(v4.new_markdown_cell("## Hints\n\n" + "\n".join(f"- {' '.join(h.split())}" for h in c.hints)))
    call = f'validator.check("{c.id}"' + (", answers=ANSWERS)" if c.questions else ")")
    cells.append(v4.new_markdown_cell("## Grade"))
    cells.append(v4.new_code_cell(f"import validator\n\n{call}"))
    return _notebook(cells)


def _notebook(cells: list) -> Any:
    nbf = _nbformat()
    nb = nbf.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"}})
    nbf.validate(nb)
    return nb


# -- an instructor's notebook ---------------------------------------------------------------------------------
def strip_code(source: str, label: str) -> tuple[str, list[str]]:
    """A code cell without its solution and hidden-test regions; returns (text, the solution lines cut)."""
    markers = _markers(source, label)
    if not markers:
        return source, []
    lines = source.split("\n")
    owners = _function_spans(source)
    out: list[str] = []
    cut: list[str] = []
    opens = {n: kind for n, kind, text in markers if text in (SOLUTION[0], HIDDEN[0])}
    i = 0
    while i < len(lines):
        kind = opens.get(i + 1)
        if kind is None:
            if any(n == i + 1 for n, _, _ in markers):
                raise NotebookReleaseError(f"{label}, line {i + 1}: `{lines[i].strip()}` without a matching "
                                           "BEGIN marker above it")
            out.append(lines[i])
            i += 1
            continue
        opening, closing = (SOLUTION if kind == "solution" else HIDDEN)
        end = next((n for n, k, text in markers if n > i + 1 and text == closing), None)
        if end is None:
            raise NotebookReleaseError(f"{label}, line {i + 1}: `### {opening}` is never closed by `### {closing}`")
        if any(i + 1 < n < end for n in opens):
            raise NotebookReleaseError(f"{label}, line {i + 1}: regions do not nest (another BEGIN before its END)")
        indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
        region = lines[i + 1:end - 1]
        cut += [line.strip() for line in region if line.strip() and not line.strip().startswith("#")]
        if kind == "solution":
            inside = any(a < i + 1 <= b for a, b in owners)
            out.append(f"{indent}# YOUR CODE HERE")
            if inside:
                out.append(f"{indent}raise NotImplementedError()")
        i = end
    text = "\n".join(out)
    try:
        ast.parse(text)
    except SyntaxError as exc:
        raise NotebookReleaseError(f"{label}: the cell does not parse once its solution is cut (line {exc.lineno}: "
                                   f"{exc.msg}): put each region inside a function body, or around whole "
                                   "statements") from None
    return text, cut


def _markers(source: str, label: str) -> list[tuple[int, str, str]]:
    """(line, "solution"|"hidden", marker text) for nbgrader's marker comments (strings are not markers)."""
    found = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        tokens = []
        for n, line in enumerate(source.split("\n"), 1):  # IPython syntax: fall back to whole-line comments
            if line.strip().startswith("#"):
                tokens.append(tokenize.TokenInfo(tokenize.COMMENT, line.strip(), (n, 0), (n, 0), line))
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").strip()
        if text in SOLUTION + HIDDEN:
            if tok.line.strip() != tok.string.strip():
                raise NotebookReleaseError(f"{label}, line {tok.start[0]}: `{tok.string.strip()}` must be on a line "
                                           "of its own")
            found.append((tok.start[0], "solution" if text in SOLUTION else "hidden", text))
    return sorted(found)


def _function_spans(source: str) -> list[tuple[int, int]]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [(n.lineno, n.end_lineno or n.lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def student_version(path: Path) -> tuple[Any, list[str]]:
    """An instructor's notebook as students get it, and the solution lines that were cut (for the leak search)."""
    nbf = _nbformat()
    try:
        nb = nbf.read(str(path), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises several kinds
        raise NotebookReleaseError(f"{path} cannot be read as a notebook: {exc}") from None
    cut: list[str] = []
    has_check = False
    for i, cell in enumerate(nb.cells, 1):
        label = f"{path.name}, cell {i}"
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type == "code":
            cell.source, lines = strip_code(cell.source, label)
            cut += lines
            cell.outputs = []
            cell.execution_count = None
            has_check |= "validator.check(" in cell.source or "%validator" in cell.source
        elif cell.cell_type == "markdown":
            for match in MARK_SCHEME.finditer(cell.source):
                cut += [line.strip() for line in match.group(0).split("\n")[1:-1] if line.strip()]
            cell.source = MARK_SCHEME.sub("YOUR ANSWER HERE", cell.source)
    if not has_check:
        nb.cells.append(nbf.v4.new_markdown_cell("## Grade\n\nRun this cell to grade what your kernel defined."))
        nb.cells.append(nbf.v4.new_code_cell("import validator\n\nvalidator.check()"))
    nbf.validate(nb)
    return nb, cut


# -- writing -----------------------------------------------------------------------------------------------------
def write_notebooks(out: Path, *, catalogue: Mapping[str, Challenge], stub: str, reference_source: str,
                    from_notebooks: Iterable[Path] = (), per_challenge: bool = True) -> tuple[list[Path], list[str]]:
    """Write ``out/notebooks/``; returns the notebooks written and the instructor solution lines cut from them."""
    nbf = _nbformat()
    folder = out / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    cut: list[str] = []
    if per_challenge:
        for cid, challenge in catalogue.items():
            nb = challenge_notebook(challenge, stub=stub, deps=dependencies(challenge, reference_source, catalogue))
            written.append(folder / f"{cid}.ipynb")
            nbf.write(nb, str(written[-1]))
    for path in from_notebooks:
        path = Path(path)
        nb, lines = student_version(path)
        cut += lines
        dest = folder / path.name
        if dest in written:
            raise NotebookReleaseError(f"{path.name} has the name of a challenge's notebook: rename it")
        nbf.write(nb, str(dest))
        written.append(dest)
    (folder / "README.md").write_text(NOTEBOOKS_README, encoding="utf-8")
    return written, cut


def add_to_handout(out: Path, *, challenges_dir: Path, reference_dir: Path, student_dir: Path,
                   from_notebooks: Iterable[Path] = (), per_challenge: bool = True) -> list[Path]:
    """Add the notebooks to a handout built by :func:`validator.instructor.release.handout`, then search the
    handout again for leaks (the reference's lines, the key's text, the instructor notebooks' solutions).
    A leak removes the handout, as the handout's own search does."""
    import shutil

    from validator.instructor.release import ReleaseError, find_leaks, handed_out_text, secrets
    from validator.spec import load_catalogue

    catalogue = load_catalogue(challenges_dir)
    stub = (student_dir / "layers.py").read_text(encoding="utf-8")
    reference = reference_dir / "layers.py"
    written, cut = write_notebooks(out, catalogue=catalogue, stub=stub,
                                   reference_source=reference.read_text(encoding="utf-8"),
                                   from_notebooks=from_notebooks, per_challenge=per_challenge)
    needles = secrets(reference, reference_dir / "answer_key.yaml", handed_out_text(student_dir, challenges_dir,
                                                                                    catalogue))
    needles += [(line, f"a line of an instructor notebook's solution ({line[:60]!r})") for line in cut
                if len(line) >= 24]
    leaks = find_leaks(out / FOLDER, needles)
    if leaks:
        shutil.rmtree(out)
        raise ReleaseError("the notebooks would leak, so the handout was removed:\n" + "\n".join(
            f"  {FOLDER}/{leak.path}: {leak.what}" for leak in leaks[:20]))
    return written


def release(out: Path, *, per_challenge: bool, from_notebooks: Iterable[str] = ()) -> list[Path]:
    """``validator release --out DIR --notebook [--notebook-from NB]...``, after the handout is written."""
    from validator import paths

    return add_to_handout(out, challenges_dir=paths.challenges_dir(), reference_dir=paths.reference_dir(),
                          student_dir=paths.PROJECT_ROOT / "student", per_challenge=per_challenge,
                          from_notebooks=[Path(p) for p in from_notebooks])
