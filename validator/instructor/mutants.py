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
    family: str = "one-point"  # or "bug-class" (see generate_bug_classes)

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
              new_text: str, names_from: ast.AST | None = None, family: str = "one-point") -> Mutant | None:
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
                      names=_read_names(names_from if names_from is not None else node), family=family)

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


# -- bug-class operators ---------------------------------------------------------------------------------------
#
# One-point mutants change one token; the bugs below take a pattern, and no one-point mutant makes them. Each
# operator derives its pattern from the reference wherever it applies (and makes nothing where it does not):
#
#   cache_first_call     a parameter, or a tensor built from shapes alone, kept from the first call of forward
#   inplace_input        an arithmetic step on an input (or an alias of it: x.to(), x.float(), x[...]) done in
#                        place where autograd lets it (no grad needed), or ~mask as mask.logical_not_()
#   view_for_reshape     .reshape(...) as .view(...)
#   reseed               torch.manual_seed(0) at the top of a constructor
#   buffer_to_parameter  register_buffer(name, t) as a frozen nn.Parameter (requires_grad=False)
#   buffer_to_attribute  register_buffer(name, t) as a plain tensor attribute
#   finite_mask_fill     float("-inf") as -1e4
#   loop                 A @ B as a Python loop over the rows of A
#   drop_upcast          x.to(<float32 or a promotion with it>) or x.float() as x
#   library_layer        a call of one of the catalogue's own layers (Linear, RMSNorm, softmax, ...) as the library's
#
# Their scope is wider than the one-point mutants': the entries, and every function and class of the reference the
# entries use, transitively, so a composite (the transformer block) gets the bugs of its parts (a dropped upcast in
# its RMSNorm) and is graded on them.

BUG_CLASSES = ("cache_first_call", "inplace_input", "view_for_reshape", "reseed", "buffer_to_parameter",
               "buffer_to_attribute", "finite_mask_fill", "loop", "drop_upcast", "library_layer")

_META_ATTRS = {"shape", "device", "dtype", "ndim", "is_floating_point", "requires_grad"}
_META_CALLS = {"size", "dim", "numel"}
_META_FUNCS = {"promote_types", "result_type", "finfo", "iinfo", "get_default_dtype", "len", "range", "isinstance",
               "getattr", "hasattr", "sqrt", "int", "float", "bool", "max", "min", "zip", "enumerate", "tuple", "list",
               "super", "is_grad_enabled"}
_ALIAS_METHODS = {"to", "float", "double", "half", "bfloat16", "type_as", "contiguous", "view", "view_as", "reshape",
                  "expand", "expand_as", "flatten", "squeeze", "unsqueeze", "transpose", "permute", "movedim", "detach"}
_INPLACE = {ast.Add: "add_", ast.Sub: "sub_", ast.Mult: "mul_", ast.Div: "div_"}
# the catalogue's layers and the library's versions of them: (callable, keywords the library needs to match)
LIBRARY_LAYERS = {
    "Linear": ("torch.nn.Linear", {"bias": "False"}),
    "RMSNorm": ("torch.nn.RMSNorm", {"eps": "1e-05"}),
    "Embedding": ("torch.nn.Embedding", {}),
    "softmax": ("torch.softmax", {}),
    "scaled_dot_product_attention": ("torch.nn.functional.scaled_dot_product_attention", {}),
    "embedding": ("torch.nn.functional.embedding", {}),
}


def bug_scope(source: str, entries: Iterable[str]) -> list[str]:
    """The entries and every module-level function and class they use, transitively: a composite's parts too."""
    tree = ast.parse(source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    out: list[str] = []
    todo = [e for e in entries if e in defs]
    while todo:
        name = todo.pop(0)
        if name in out:
            continue
        out.append(name)
        for node in ast.walk(defs[name]):
            if isinstance(node, ast.Name) and node.id in defs and node.id not in out and node.id != name:
                todo.append(node.id)
    return out


def _tensor_params(fn: ast.FunctionDef) -> list[str]:
    """Arguments annotated as tensors (``Tensor``, ``Float[Tensor, ...]``): the inputs a caller passes."""
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    return [a.arg for a in args if a.annotation is not None and "Tensor" in ast.unparse(a.annotation)]


def _targets(target: ast.AST) -> list[ast.AST]:
    return list(target.elts) if isinstance(target, (ast.Tuple, ast.List)) else [target]


def _assignments(fn: ast.FunctionDef) -> list[tuple[ast.AST, ast.AST]]:
    """(target, value) of each assignment in ``fn`` (nested functions aside), tuples paired element by element."""
    out = []
    for node in _walk_own(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                elts = _targets(target)
                values = _targets(node.value) if isinstance(node.value, (ast.Tuple, ast.List)) and \
                    len(_targets(node.value)) == len(elts) else [node.value] * len(elts)
                out += list(zip(elts, values))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            out.append((node.target, node.value))
    return out


def _walk_own(fn: ast.AST):
    """ast.walk of a function's body without descending into nested functions or lambdas."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop(0)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        yield node
        todo.extend(ast.iter_child_nodes(node))


def _names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Starred):
        target = target.value
    return [target.id] if isinstance(target, ast.Name) else []


def _reads_data(node: ast.AST, data: set[str]) -> bool:
    """Whether ``node`` reads a value of the data (the inputs and what is computed from them), rather than only its
    metadata (``x.shape``, ``x.device``, ``x.size()``)."""
    if isinstance(node, ast.Attribute) and node.attr in _META_ATTRS and isinstance(node.value, ast.Name):
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _META_CALLS \
            and isinstance(node.func.value, ast.Name):
        return any(_reads_data(a, data) for a in node.args)
    if isinstance(node, ast.Name):
        return node.id in data
    return any(_reads_data(c, data) for c in ast.iter_child_nodes(node))


def _data_names(fn: ast.FunctionDef) -> set[str]:
    """The forward's arguments and every local computed from their values (shapes and devices are not values)."""
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    data = {a.arg for a in args if a.arg not in ("self", "cls", "ctx")}
    pairs = _assignments(fn)
    for _ in range(3):  # a fixpoint over a few passes: locals assigned from locals
        for target, value in pairs:
            if _reads_data(value, data):
                data.update(_names(target))
    return data


def _aliases(fn: ast.FunctionDef) -> set[str]:
    """The tensor arguments, and the locals that may be the same tensor (x.to(...), x.float(), x[..., 0::2], ...)."""
    alias = set(_tensor_params(fn))
    pairs = _assignments(fn)
    for _ in range(3):
        for target, value in pairs:
            base = value
            while True:
                if isinstance(base, ast.Call) and isinstance(base.func, ast.Attribute) and base.func.attr in _ALIAS_METHODS:
                    base = base.func.value
                elif isinstance(base, ast.Subscript):
                    base = base.value
                else:
                    break
            if isinstance(base, ast.Name) and base.id in alias and base is not value:
                alias.update(_names(target))
    return alias


def _parameter_names(tree: ast.Module) -> set[str]:
    """Attribute names the reference assigns an ``nn.Parameter`` to (``self.weight = nn.Parameter(...)``)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and \
                _call_name(node.value) == "Parameter":
            for target in node.targets:
                if isinstance(target, ast.Attribute):
                    out.add(target.attr)
    return out


def _defined(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


class _BugClassGenerator(_Generator):
    """The bug-class operators, on the same text surgery as the one-point ones."""

    def __init__(self, source: str):
        super().__init__(source)
        self.parameter_names = _parameter_names(self.tree)
        self.defined = _defined(self.tree)

    def mutants(self, qualname: str, fn: ast.FunctionDef) -> Iterator[Mutant]:
        method = qualname.rsplit(".", 1)[-1] if "." in qualname else None
        ops = []
        if method == "forward" and "." in qualname:
            ops.append(self._cache_first_call)
        if method != "__init__":
            ops.append(self._inplace_input)
        if method == "__init__":
            ops.append(self._reseed)
        ops += [self._view_for_reshape, self._buffers, self._finite_fill, self._loop, self._drop_upcast,
                self._library]
        for op in ops:
            yield from filter(None, op(qualname, fn))

    def _own(self, fn: ast.FunctionDef):
        for node in _walk_own(fn):
            if getattr(node, "lineno", None) in self.solution:
                yield node

    def _bug(self, qualname, fn, node, operator, detail, text, names_from=None):
        return self._make(qualname, fn, node, operator, detail, text, names_from=names_from, family="bug-class")

    # -- cache_first_call
    def _cache_first_call(self, qualname: str, fn: ast.FunctionDef):
        data = _data_names(fn)
        # what a raise builds is no state, and a metadata call (x.dim()) is not a tensor
        taken: set[int] = {id(n) for r in _walk_own(fn) if isinstance(r, ast.Raise) for n in ast.walk(r)}
        for node in self._own(fn):
            if id(node) in taken:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _META_CALLS:
                continue
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
                    node.attr in self.parameter_names and ast.unparse(node).startswith("self."):
                what = ast.unparse(node)
                key = f"_first_call_L{node.lineno - fn.lineno}_{node.col_offset}"
                taken.update(id(n) for n in ast.walk(node))
                yield self._bug(qualname, fn, node, "cache_first_call", what,
                                f"self.__dict__.setdefault({key!r}, {what}.clone())")
            elif isinstance(node, ast.Call) and _call_name(node) not in _META_FUNCS and \
                    not _reads_data(node, data) and any(isinstance(n, ast.Name) for n in ast.walk(node)) and \
                    not (isinstance(node.func, ast.Attribute) and ast.unparse(node.func.value).startswith("self.")):
                key = f"_first_call_L{node.lineno - fn.lineno}_{node.col_offset}"
                taken.update(id(n) for n in ast.walk(node))
                yield self._bug(qualname, fn, node, "cache_first_call", _call_name(node),
                                f"self.__dict__.setdefault({key!r}, {ast.unparse(node)})")

    # -- inplace_input
    def _inplace_input(self, qualname: str, fn: ast.FunctionDef):
        alias = _aliases(fn)
        if not alias:
            return
        for node in self._own(fn):
            if isinstance(node, ast.BinOp) and type(node.op) in _INPLACE and isinstance(node.left, ast.Name) \
                    and node.left.id in alias:
                a, b = node.left.id, ast.unparse(node.right)
                text = f"({a}.{_INPLACE[type(node.op)]}({b}) if not {a}.requires_grad else {ast.unparse(node)})"
                yield self._bug(qualname, fn, node, "inplace_input", f"{a}{_SYMBOL[type(node.op)]}=", text)
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert) and \
                    isinstance(node.operand, ast.Name) and node.operand.id in alias:
                a = node.operand.id
                yield self._bug(qualname, fn, node, "inplace_input", f"~{a}",
                                f"({a}.logical_not_() if not {a}.requires_grad else ~{a})")

    # -- view_for_reshape
    def _view_for_reshape(self, qualname: str, fn: ast.FunctionDef):
        for node in self._own(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reshape":
                call = ast.Call(ast.Attribute(node.func.value, "view", ast.Load()), node.args, node.keywords)
                yield self._bug(qualname, fn, node, "view_for_reshape", ast.unparse(node.func.value), ast.unparse(call))

    # -- reseed
    def _reseed(self, qualname: str, fn: ast.FunctionDef):
        body = [s for s in fn.body if not _is_docstring(s) and s.lineno in self.solution]
        body = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
                                        and "super" in ast.unparse(s.value.func))]
        if body:
            first = body[0]
            segment = ast.get_source_segment(self.source, first)
            text = "torch.manual_seed(0)\n" + " " * first.col_offset + segment
            yield self._bug(qualname, fn, first, "reseed", "manual_seed(0)", text)

    # -- buffer_to_parameter, buffer_to_attribute
    def _buffers(self, qualname: str, fn: ast.FunctionDef):
        for node in self._own(fn):
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
                    _call_name(node.value) == "register_buffer" and len(node.value.args) >= 2 and \
                    isinstance(node.value.args[0], ast.Constant) and isinstance(node.value.args[0].value, str):
                name, value = node.value.args[0].value, ast.unparse(node.value.args[1])
                owner = ast.unparse(node.value.func.value) if isinstance(node.value.func, ast.Attribute) else "self"
                yield self._bug(qualname, fn, node, "buffer_to_parameter", name,
                                f"{owner}.{name} = torch.nn.Parameter({value}, requires_grad=False)")
                yield self._bug(qualname, fn, node, "buffer_to_attribute", name, f"{owner}.{name} = {value}")

    # -- finite_mask_fill
    def _finite_fill(self, qualname: str, fn: ast.FunctionDef):
        for node in self._own(fn):
            text = ast.unparse(node) if isinstance(node, (ast.Call, ast.UnaryOp)) else ""
            if text in ("float('-inf')", "-math.inf", "-float('inf')", "-torch.inf"):
                yield self._bug(qualname, fn, node, "finite_mask_fill", "-inf->-1e4", "-1e4")

    # -- loop
    def _loop(self, qualname: str, fn: ast.FunctionDef):
        for node in self._own(fn):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
                left, right = ast.unparse(node.left), ast.unparse(node.right)
                text = f"torch.cat([_row.unsqueeze(-2) @ ({right}) for _row in ({left}).unbind(-2)], dim=-2)"
                yield self._bug(qualname, fn, node, "loop", "@", text)

    # -- drop_upcast
    def _drop_upcast(self, qualname: str, fn: ast.FunctionDef):
        for node in self._own(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = ast.unparse(node.func.value)
            if node.func.attr == "float" and not node.args:
                yield self._bug(qualname, fn, node, "drop_upcast", f"{target}.float", target)
            elif node.func.attr == "to" and node.args:
                wanted = ast.unparse(node.args[0])
                if "float32" in wanted or "promote_types" in wanted:
                    yield self._bug(qualname, fn, node, "drop_upcast", f"{target}.to", f"({target})")

    # -- library_layer
    def _library(self, qualname: str, fn: ast.FunctionDef):
        own = qualname.split(".")[0]
        for node in self._own(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in LIBRARY_LAYERS \
                    and node.func.id in self.defined and node.func.id != own:
                library, extra = LIBRARY_LAYERS[node.func.id]
                given = {k.arg for k in node.keywords}
                keywords = list(node.keywords) + [ast.keyword(k, ast.parse(v, mode="eval").body)
                                                  for k, v in extra.items() if k not in given]
                call = ast.Call(ast.parse(library, mode="eval").body, node.args, keywords)
                yield self._bug(qualname, fn, node, "library_layer", f"{node.func.id}->{library}", ast.unparse(call))


def generate_bug_classes(source: str, entries: Iterable[str]) -> list[Mutant]:
    """Every bug-class mutant (see ``BUG_CLASSES``) of the code of ``entries`` and of every function and class they
    use; deterministic for a given source. Each is one bug: one occurrence of one pattern."""
    gen = _BugClassGenerator(source)
    out: list[Mutant] = []
    for qualname, fn in _functions(gen.tree, bug_scope(source, entries)):
        out.extend(gen.mutants(qualname, fn))
    return out
