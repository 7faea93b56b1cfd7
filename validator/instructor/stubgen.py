"""Build the student stub from the reference: solution regions out, everything else verbatim.

A solution region is the lines from a ``# BEGIN SOLUTION`` comment to the next
``# END SOLUTION`` comment. Inside a function body it becomes one
``raise NotImplementedError("<name>: see challenges/<id>.md")`` at the
region's indentation; at module or class level it is removed. Signatures,
annotations, docstrings, imports and comments outside regions are kept as
written. The module docstring is replaced by the students' header.
"""

from __future__ import annotations

import ast
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
MAX_LINE = 79

STUDENT_HEADER = '''"""Your implementations of the LLM-layer challenges.

Replace each `raise NotImplementedError` with your code. Keep the names,
signatures and parameter names: the grader imports this file and calls them
as the docstrings describe. Each challenge is explained in challenges/<id>.md.
"""'''


class StubError(Exception):
    """The reference's markers cannot be turned into a stub; ``problems`` are (line, message)."""

    def __init__(self, path: str, problems: list[tuple[int, str]]):
        self.path = path
        self.problems = problems
        super().__init__("\n".join(f"{path}:{line}: {msg}" for line, msg in problems))


@dataclass(frozen=True)
class Region:
    begin: int  # 1-based line of the BEGIN marker
    end: int  # 1-based line of the END marker
    indent: str
    owner: str | None  # qualified name of the enclosing function, None at module/class level
    top: str | None  # the top-level def/class that holds it


def _marker_lines(source: str) -> list[tuple[int, str, str]]:
    """(line, BEGIN|END, indentation) for marker comments; strings that look like markers are ignored."""
    found = []
    lines = source.splitlines()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        text = tok.string.lstrip("#").strip()
        if text in (BEGIN, END):
            line = lines[tok.start[0] - 1]
            if line.strip() != tok.string.strip():
                raise StubError("", [(tok.start[0], f"`# {text}` must be on a line of its own")])
            found.append((tok.start[0], text, line[: len(line) - len(line.lstrip())]))
    return found


def _owners(tree: ast.Module) -> list[tuple[int, int, str, str]]:
    """(first body line, last line, qualified name, top-level name) of every function, innermost last."""
    out: list[tuple[int, int, str, str]] = []

    def visit(node: ast.AST, prefix: str, top: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                owner_top = top or child.name
                if not isinstance(child, ast.ClassDef):
                    out.append((child.body[0].lineno, child.end_lineno, name, owner_top))
                visit(child, name + ".", owner_top)

    visit(tree, "", None)
    return out


def find_regions(source: str, path: str = "reference/layers.py") -> list[Region]:
    try:
        tree = ast.parse(source)
        markers = _marker_lines(source)
    except SyntaxError as exc:
        raise StubError(path, [(exc.lineno or 0, f"does not parse: {exc.msg}")]) from None
    except StubError as exc:
        raise StubError(path, exc.problems) from None
    problems: list[tuple[int, str]] = []
    regions: list[Region] = []
    open_at: tuple[int, str] | None = None
    owners = _owners(tree)
    src_lines = source.splitlines()
    tops = {n.name: (n.lineno, n.end_lineno) for n in tree.body
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    for line, kind, indent in markers:
        if kind == BEGIN:
            if open_at is not None:
                problems.append((line, f"`# {BEGIN}` inside the region opened at line {open_at[0]}: "
                                       "regions do not nest"))
                continue
            open_at = (line, indent)
            continue
        if open_at is None:
            problems.append((line, f"`# {END}` without a matching `# {BEGIN}` above it"))
            continue
        begin, begin_indent = open_at
        open_at = None
        if indent != begin_indent:
            problems.append((line, f"`# {END}` is indented differently from its `# {BEGIN}` at line {begin}"))
            continue
        def innermost(at: int):
            inner = [o for o in owners if o[0] <= at <= o[1]]
            return max(inner, key=lambda o: o[0]) if inner else None

        code = [n for n in range(begin + 1, line) if src_lines[n - 1].strip()
                and not src_lines[n - 1].strip().startswith("#")]
        if not code:
            problems.append((begin, "an empty solution region: put the solution between the markers"))
            continue
        owner = innermost(code[0])
        if owner != innermost(code[-1]) or (owner is not None and begin < owner[0]):
            problems.append((begin, f"the region from line {begin} to {line} must start and end inside "
                                    "the same function body"))
            continue
        top = next((name for name, (a, b) in tops.items() if a <= begin <= b), None)
        regions.append(Region(begin, line, begin_indent, owner[2] if owner else None, top))
    if open_at is not None:
        problems.append((open_at[0], f"`# {BEGIN}` is never closed by `# {END}`"))
    if problems:
        raise StubError(path, problems)
    return regions


def _module_docstring_span(tree: ast.Module) -> tuple[int, int] | None:
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(getattr(tree.body[0], "value", None),
                                                                       ast.Constant) \
            and isinstance(tree.body[0].value.value, str):
        return tree.body[0].lineno, tree.body[0].end_lineno
    return None


def challenge_of_names(catalogue: Mapping[str, object]) -> dict[str, str]:
    """Each entry name -> its challenge: the spec where it is the first entry, else the first spec naming it."""
    owner: dict[str, str] = {}
    for cid, challenge in sorted(catalogue.items()):
        first = next(iter(challenge.entries), None)
        if first is not None:
            owner.setdefault(first, cid)
    for cid, challenge in sorted(catalogue.items()):
        for name in challenge.entries:
            owner.setdefault(name, cid)
    return owner


def make_stub(source: str, catalogue: Mapping[str, object], path: str = "reference/layers.py",
              header: str = STUDENT_HEADER) -> str:
    """The student's layers.py for a reference source; raises StubError naming file and line."""
    regions = find_regions(source, path)
    owners = challenge_of_names(catalogue)
    problems = []
    for r in regions:
        if r.owner is not None and (r.top is None or r.top not in owners):
            problems.append((r.begin, f"solution region in `{r.owner}`, but no challenge lists "
                                      f"`{r.top or r.owner}` under `entries`: add it to a spec so the stub "
                                      "can point students to the right page"))
    if problems:
        raise StubError(path, problems)
    lines = source.splitlines()
    out: list[str] = []
    tree = ast.parse(source)
    doc = _module_docstring_span(tree)
    by_begin = {r.begin: r for r in regions}
    i = 1
    while i <= len(lines):
        if doc and i == doc[0]:
            out.extend(header.splitlines())
            i = doc[1] + 1
            continue
        region = by_begin.get(i)
        if region is None:
            out.append(lines[i - 1])
            i += 1
            continue
        if region.owner is not None:
            cid = owners[region.top]
            message = f"{region.owner}: see challenges/{cid}.md"
            quoted = '"' + message.replace("\\", "\\\\").replace('"', '\\"') + '"'
            line = f"{region.indent}raise NotImplementedError({quoted})"
            if len(line) > MAX_LINE:
                line = f"{region.indent}raise NotImplementedError(\n{region.indent}    {quoted})"
            out.append(line)
        i = region.end + 1
    stub = "\n".join(out).rstrip("\n") + "\n"
    try:
        ast.parse(stub)
    except SyntaxError as exc:
        raise StubError(path, [(0, f"the stub does not parse after cutting the regions (stub line "
                                   f"{exc.lineno}: {exc.msg}): a class or module body became empty?")]) from None
    if BEGIN in stub or END in stub:
        raise StubError(path, [(0, "a solution marker survived in the stub")])
    return stub


def solution_lines(source: str) -> list[str]:
    """The stripped lines inside solution regions (for leak searches)."""
    lines = source.splitlines()
    out = []
    for r in find_regions(source):
        out.extend(line.strip() for line in lines[r.begin: r.end - 1] if line.strip())
    return out


def entry_snippets(stub: str) -> dict[str, str]:
    """Top-level name -> its source text in the stub (signature, docstring, raise), for the docs."""
    tree = ast.parse(stub)
    lines = stub.splitlines()
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[node.name] = "\n".join(lines[start - 1: node.end_lineno])
    return out


def write_if_changed(path: Path, text: str) -> bool:
    """Write ``text`` unless the file already holds it; True when written."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return True
