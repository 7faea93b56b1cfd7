"""One-point mutants of the reference, for `validator strength`.

Each mutant is the whole reference file with one small change inside the code
of a challenge's entries (and the module-level functions they call): an
operator swapped, a constant or a default argument changed, a statement
dropped, a call argument dropped or swapped, a keyword argument removed. The
change is made on the source text at the node's position, so the rest of the
file (and the diff an instructor reads) is untouched.

Ids are stable under edits elsewhere in the file: ``Qualname:L<line from the
def>:<operator>:<detail>``, with ``#2``, ``#3`` for repeats on the same line.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

_BEGIN, _END = re.compile(r"#\s*BEGIN SOLUTION"), re.compile(r"#\s*END SOLUTION")

_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Div,
          ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult, ast.MatMult: ast.Mult}
# each comparison gets its boundary shift and its negation
_COMPARE = {ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt), ast.Gt: (ast.GtE, ast.LtE),
            ast.GtE: (ast.Gt, ast.Lt), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.In: (ast.NotIn,),
            ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,)}
_SYMBOL = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
           ast.Pow: "**", ast.MatMult: "@", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.Eq: "==", ast.NotEq: "!=", ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
           ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    """One mutant: its stable id, where it is, and the whole mutated reference source."""

    id: str
    qualname: str
    line: int  # 1-based line of the change in the original file
    operator: str
    detail: str
    source: str
    original_line: str
    names: tuple[str, ...] = field(default=())  # identifiers the mutated code reads (for input hints)

    def diff(self, original: str, context: int = 1) -> str:
        return "".join(difflib.unified_diff(original.splitlines(True), self.source.splitlines(True),
                                            "reference/layers.py", f"mutant {self.id}", n=context))


def _solution_lines(source: str) -> set[int]:
    """Line numbers inside ``# BEGIN SOLUTION`` ... ``# END SOLUTION`` regions (all lines if there are none)."""
    lines = source.splitlines()
    inside, out = False, set()
    for i, text in enumerate(lines, 1):
        if _BEGIN.search(text):
            inside = True
        elif _END.search(text):
            inside = False
        elif inside:
            out.add(i)
    return out or set(range(1, len(lines) + 1))


def _offsets(source: str) -> list[int]:
    starts, pos = [0], 0
    for line in source.splitlines(True):
        pos += len(line)
        starts.append(pos)
    return starts


def _called_functions(tree: ast.Module, roots: Iterable[str]) -> list[str]:
    """The module-level functions that ``roots`` use, transitively (helpers that are simple to mutate)."""
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    seen: list[str] = []
    todo = [r for r in roots if r in defs]
    while todo:
        name = todo.pop(0)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name) and node.id in functions and node.id not in roots and node.id not in seen:
                seen.append(node.id)
                todo.append(node.id)
    return seen


def _functions(tree: ast.Module, names: Iterable[str]) -> Iterator[tuple[str, ast.FunctionDef]]:
    """(qualname, def) for each named function and each method of each named class."""
    wanted = list(names)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in wanted:
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and node.name in wanted:
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    yield f"{node.name}.{item.name}", item


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _changed_number(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 1.0 if value == 0.0 else value * 2
    return None


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return "call"


def _read_names(node: ast.AST) -> tuple[str, ...]:
    out: list[str] = []
    for n in ast.walk(node):
        name = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else \
            n.arg if isinstance(n, ast.arg) else None
        if name and name not in out:
            out.append(name)
    return tuple(out)


class _Generator:
    def __init__(self, source: str):
        self.source = source
        self.tree = ast.parse(source)
        self.lines = source.splitlines(True)
        self.starts = _offsets(source)
        self.solution = _solution_lines(source)
        self.seen_ids: dict[str, int] = {}
        self.seen_sources: set[str] = {source}

    # -- text surgery ---------------------------------------------------------------
    def _replace(self, node: ast.AST, text: str) -> str:
        # col offsets are UTF-8 byte offsets; the reference is ASCII where code is, so bytes == chars there
        start = self.starts[node.lineno - 1] + len(self.lines[node.lineno - 1].encode()[:node.col_offset].decode())
        end = self.starts[node.end_lineno - 1] + len(
            self.lines[node.end_lineno - 1].encode()[:node.end_col_offset].decode())
        return self.source[:start] + text + self.source[end:]

    def _make(self, qualname: str, fn: ast.FunctionDef, node: ast.AST, operator: str, detail: str,
              new_text: str, names_from: ast.AST | None = None) -> Mutant | None:
        source = self._replace(node, new_text)
        if source in self.seen_sources:
            return None
        try:
            compile(source, "<mutant>", "exec")
        except SyntaxError:
            return None
        self.seen_sources.add(source)
        base = f"{qualname}:L{node.lineno - fn.lineno}:{operator}:{detail}"
        count = self.seen_ids.get(base, 0) + 1
        self.seen_ids[base] = count
        mid = base if count == 1 else f"{base}#{count}"
        return Mutant(id=mid, qualname=qualname, line=node.lineno, operator=operator, detail=detail,
                      source=source, original_line=self.lines[node.lineno - 1].strip(),
                      names=_read_names(names_from if names_from is not None else node))

    # -- operators ----------------------------------------------------------------------
    def mutants(self, qualname: str, fn: ast.FunctionDef) -> Iterator[Mutant]:
        yield from self._defaults(qualname, fn)
        body = [s for s in fn.body if not _is_docstring(s)]
        for stmt in body:
            # the inside of an f-string only changes a message's text: the message checks own that
            in_fstring = {id(n) for j in ast.walk(stmt) if isinstance(j, ast.JoinedStr) for n in ast.walk(j)}
            for node in ast.walk(stmt):
                if getattr(node, "lineno", None) not in self.solution or id(node) in in_fstring:
                    continue
                yield from filter(None, self._at(qualname, fn, node))

    def _defaults(self, qualname: str, fn: ast.FunctionDef) -> Iterator[Mutant]:
        args = fn.args
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for arg, default in pairs:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                continue
            if isinstance(value, str):
                new = "'__mutant__'"
            else:
                changed = _changed_number(value)
                if changed is None:
                    continue  # None defaults (device, dtype, an optional index) have no neighbour to try
                new = repr(changed)
            yield from filter(None, [self._make(qualname, fn, default, "default",
                                                f"{arg.arg}:{ast.unparse(default)}->{new}", new, names_from=arg)])

    def _at(self, qualname: str, fn: ast.FunctionDef, node: ast.AST) -> Iterator[Mutant | None]:
        make = lambda *a, **k: self._make(qualname, fn, *a, **k)  # noqa: E731
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            new = ast.BinOp(node.left, _ARITH[type(node.op)](), node.right)
            yield make(node, "arith", f"{_SYMBOL[type(node.op)]}->{_SYMBOL[type(new.op)]}", ast.unparse(new))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _ARITH:
            new = ast.AugAssign(node.target, _ARITH[type(node.op)](), node.value)
            yield make(node, "arith", f"{_SYMBOL[type(node.op)]}=->{_SYMBOL[type(new.op)]}=", ast.unparse(new))
        elif isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for repl in _COMPARE.get(type(op), ()):
                    ops = list(node.ops)
                    ops[i] = repl()
                    new = ast.Compare(node.left, ops, node.comparators)
                    yield make(node, "compare_op", f"{_SYMBOL[type(op)]}->{_SYMBOL[repl]}", ast.unparse(new))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield make(node, "bool_op", f"{_SYMBOL[type(node.op)]}->{_SYMBOL[type(other)]}",
                       ast.unparse(ast.BoolOp(other, node.values)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
            kind = "not" if isinstance(node.op, ast.Not) else "neg"
            yield make(node, "bool_op" if kind == "not" else "arith", f"drop_{kind}",
                       f"({ast.unparse(node.operand)})")
        elif isinstance(node, ast.Constant) and not isinstance(node.value, str) and node.value is not None \
                and not isinstance(node.value, bytes):
            changed = _changed_number(node.value)
            if changed is not None:
                yield make(node, "constant", f"{node.value!r}->{changed!r}", repr(changed))
        elif isinstance(node, ast.Call):
            yield from self._call(make, node)
        if isinstance(node, ast.stmt) and not _is_docstring(node):
            kind = type(node).__name__.lower()
            yield make(node, "drop_stmt", kind, "pass", names_from=node.test if isinstance(node, ast.If) else node)

    @staticmethod
    def _call(make, node: ast.Call) -> Iterator[Mutant | None]:
        name = _call_name(node)
        if name == "super" or any(isinstance(a, ast.Starred) for a in node.args):
            return
        for i in range(len(node.args)):
            args = node.args[:i] + node.args[i + 1:]
            yield make(node, "drop_arg", f"{name}[{i}]", ast.unparse(ast.Call(node.func, args, node.keywords)),
                       names_from=node.args[i])
        for i in range(len(node.args) - 1):
            args = list(node.args)
            args[i], args[i + 1] = args[i + 1], args[i]
            yield make(node, "swap_args", f"{name}[{i},{i + 1}]",
                       ast.unparse(ast.Call(node.func, args, node.keywords)))
        for i, kw in enumerate(node.keywords):
            if kw.arg is None:
                continue
            keywords = node.keywords[:i] + node.keywords[i + 1:]
            yield make(node, "drop_kwarg", f"{name}.{kw.arg}", ast.unparse(ast.Call(node.func, node.args, keywords)),
                       names_from=kw)


def scope(source: str, entries: Iterable[str]) -> list[str]:
    """The names whose code is mutated for these entries: the entries, then the functions they call."""
    tree = ast.parse(source)
    roots = [e for e in entries]
    return roots + _called_functions(tree, roots)


def generate(source: str, entries: Iterable[str]) -> list[Mutant]:
    """Every one-point mutant of the code of ``entries`` (and the module-level functions they call),
    in source order; deterministic for a given source."""
    gen = _Generator(source)
    out: list[Mutant] = []
    for qualname, fn in _functions(gen.tree, scope(source, entries)):
        out.extend(gen.mutants(qualname, fn))
    return out
