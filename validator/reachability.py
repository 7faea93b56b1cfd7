"""Which lines of a submission its graded entries can run, found in the source without running it.

The source checks judge the code a graded entry runs: the entry's class or function and,
transitively, what it calls, instantiates or reads within the student's own files (methods,
helper functions, classes it builds, module-level names it uses), following imports across the
files of the submission. A ``generate()`` beside the layer that calls ``torch.softmax`` is not
the layer's code. The analysis over-approximates: a name is followed wherever it might refer
to a module-level definition (a local that shadows it is followed all the same), a class's
method is reachable once any reachable code names an attribute of that name (or torch may call
it: ``forward``, ``backward``, any ``nn.Module`` method, any dunder), code a module runs when it
is imported counts (decorators, default values, class bodies and computed values of names no one
uses included), and code that looks names up at run time (``globals()``, ``eval``, a
computed ``getattr``) widens the judgement to everything it could reach. The run-time checks
observe what actually ran; this decides only which source findings cost points.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

_DYNAMIC_SCOPE = {"globals", "locals", "vars", "eval", "exec", "__import__"}


@dataclass(frozen=True)
class Source:
    """One module of a submission: its dotted name, its file as findings name it, its decoded text."""

    module: str
    file: str
    text: str
    is_package: bool = False  # an __init__.py: relative imports resolve inside the module itself


@dataclass
class _Module:
    source: Source
    defs: dict[str, list[ast.AST]] = field(default_factory=dict)  # top-level name -> statements that bind it
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # bound name -> (module, attribute)
    stars: list[str] = field(default_factory=list)       # modules imported with *
    effects: list[ast.AST] = field(default_factory=list)  # what runs at import besides binding names
    followed: list[ast.AST] = field(default_factory=list)  # bare decorators: what they name runs at import
    imported: list[str] = field(default_factory=list)    # modules its top-level imports name
    import_lines: set[int] = field(default_factory=set)
    actions: dict[int, list] = field(default_factory=dict)  # id(node) -> what it names (_ref_actions)


@functools.lru_cache(maxsize=None)
def _torch_called() -> frozenset[str]:
    """Method names torch itself may call on a layer or an autograd function (overrides of its own)."""
    import torch

    return frozenset(dir(torch.nn.Module)) | frozenset(dir(torch.autograd.Function))


def _lines(node: ast.AST) -> range:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return range(first, (getattr(node, "end_lineno", None) or node.lineno) + 1)


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """``ast.iter_child_nodes(node)`` as a list, without its two generators: the scans and the similarity
    fingerprints visit every node of every file, for every submission of a batch."""
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out += [v for v in value if isinstance(v, ast.AST)]
    return out


def walk(node: ast.AST) -> list[ast.AST]:
    """``ast.walk(node)``'s nodes in its order (breadth first, each node's children in field order), as a list:
    about twice as fast, and walked once where a caller passes over the nodes twice."""
    out = [node]
    i = 0
    while i < len(out):
        out += child_nodes(out[i])
        i += 1
    return out


def _binds_names(target: ast.AST) -> bool:
    """An assignment target that only binds names (``a``, ``a, *b``), not an attribute or an item."""
    if isinstance(target, ast.Name):
        return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_binds_names(t) for t in target.elts)
    return isinstance(target, ast.Starred) and _binds_names(target.value)


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, (ast.Call, ast.Await)) for n in ast.walk(node))


def _is_main_guard(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == "__name__"
            and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in test.comparators))


def _absolute(source: Source, level: int, module: str | None) -> str:
    if not level:
        return module or ""
    parts = source.module.split(".")
    package = parts if source.is_package else parts[:-1]
    base = package[:max(0, len(package) - (level - 1))]
    return ".".join(base + ([module] if module else []))


@functools.lru_cache(maxsize=64)
def parsed(text: str, file: str) -> ast.Module:
    """``text`` parsed once for every reader of a submission's file (the integrity scan, this analysis): a large
    file takes ~15 ms a parse. Readers must not change the tree (the integrity scan's note on a class is its own
    and the same every time)."""
    return ast.parse(text, filename=file)


@functools.lru_cache(maxsize=64)
def _index(source: Source) -> _Module:
    mod = _Module(source)
    tree = parsed(source.text, source.file)

    def bind(name: str, node: ast.AST) -> None:
        mod.defs.setdefault(name, []).append(node)

    lazy_annotations = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                           and any(a.name == "annotations" for a in n.names) for n in tree.body)

    def defined(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        """What defining a function or a class runs at import, used or not: each decorator is called (one of the
        student's own runs its body), default values and annotations are evaluated, a class's body runs."""
        for decorator in node.decorator_list:
            (mod.effects if _calls(decorator) else mod.followed).append(decorator)
        if isinstance(node, ast.ClassDef):
            parts: list[ast.AST] = node.bases + [k.value for k in node.keywords]
            for i, stmt in enumerate(node.body):
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    defined(stmt)
                elif not (i == 0 and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
                    parts.append(stmt)
        else:
            args = node.args
            parts = args.defaults + [d for d in args.kw_defaults if d is not None]
            if not lazy_annotations:
                every = args.args + args.posonlyargs + args.kwonlyargs + [args.vararg, args.kwarg]
                parts += [a.annotation for a in every if a is not None and a.annotation is not None]
                parts += [node.returns] if node.returns is not None else []
        mod.effects.extend(part for part in parts if _calls(part))

    def visit(body: list[ast.stmt]) -> None:
        for i, node in enumerate(body):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bind(node.name, node)
                defined(node)
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
                for name in names:
                    bind(name, node)
                if not all(_binds_names(t) for t in targets):
                    mod.effects.append(node)  # assigns into an attribute or an item: it changes something
                elif node.value is not None and _calls(node.value):
                    mod.effects.append(node.value)  # the value is computed at import, whoever uses the name
            elif isinstance(node, ast.Import):
                mod.import_lines.update(_lines(node))
                for a in node.names:
                    mod.imported.append(a.name)
                    if a.asname:
                        mod.imports[a.asname] = (a.name, None)
                    else:
                        mod.imports[a.name.split(".")[0]] = (a.name.split(".")[0], None)
            elif isinstance(node, ast.ImportFrom):
                mod.import_lines.update(_lines(node))
                base = _absolute(source, node.level or 0, node.module)
                mod.imported.append(base)
                for a in node.names:
                    if a.name == "*":
                        mod.stars.append(base)
                    else:
                        mod.imported.append(f"{base}.{a.name}")
                        mod.imports[a.asname or a.name] = (base, a.name)
            elif isinstance(node, ast.If) and _is_main_guard(node):
                visit(node.orelse)  # the guarded block never runs on import
            elif isinstance(node, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
                header = [getattr(node, part) for part in ("test", "iter") if getattr(node, part, None) is not None]
                header += [item.context_expr for item in getattr(node, "items", [])]
                mod.effects.extend(header)
                for target in [getattr(node, "target", None)] + [item.optional_vars for item in getattr(node, "items", [])]:
                    for n in (ast.walk(target) if target is not None else []):
                        if isinstance(n, ast.Name):
                            bind(n.id, node)
                for part in ("body", "orelse", "finalbody"):
                    visit(getattr(node, part, []) or [])
                for handler in getattr(node, "handlers", []):
                    if handler.type is not None:
                        mod.effects.append(handler.type)
                    visit(handler.body)
            elif isinstance(node, ast.Expr) and i == 0 and isinstance(node.value, ast.Constant):
                continue  # the docstring
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Name):
                continue  # a bare name (`Tokenizer` under its import, to quiet a linter): reading it runs nothing
            else:
                mod.effects.append(node)

    visit(tree.body)
    return mod


def _ref_actions(mod: _Module, node: ast.AST) -> list[tuple[str, object]]:
    """What a reachable node names, in order: dotted names to follow (``chain``), attribute names, local imports,
    and whether it looks names up at run time. The same for every challenge's roots, so it is walked once per
    node (the module is remembered per source, :func:`_index`) and replayed."""
    known = mod.actions.get(id(node))
    if known is not None:
        return known
    out: list[tuple[str, object]] = []
    nodes = walk(node)
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
    for n in nodes:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            out.append(("import", n))
        if isinstance(n, ast.Attribute):
            out.append(("attr", n.attr))
            if n.attr == "__dict__":
                out.append(("everything", None))
        if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in inner:
            dotted = dotted_name(n)
            if dotted and not (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)):
                out.append(("chain", dotted.split(".")))
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in _DYNAMIC_SCOPE and not (n.func.id == "vars" and n.args):
                out.append(("everything", None))
            elif n.func.id in ("getattr", "setattr", "hasattr", "delattr") and len(n.args) > 1:
                name = n.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str):
                    out.append(("attr", name.value))
                    target = dotted_name(n.args[0])
                    if target:
                        out.append(("chain", target.split(".") + [name.value]))
                else:
                    out.append(("any_method", None))
                    target = dotted_name(n.args[0])
                    if target and target.split(".")[0] in mod.imports:
                        out.append(("chain", target.split(".")))
    mod.actions[id(node)] = out
    return out


class _Reach:
    def __init__(self, sources: list[Source], effects: bool = True):
        self.effects = effects  # False: what importing a module runs is left out (see reachable_lines)
        self.modules = {s.module: _index(s) for s in sources}
        self.lines: dict[str, set[int]] = {s.file: set() for s in sources}
        self.done: set[int] = set()
        self.todo: list[tuple[_Module, ast.AST]] = []
        self.classes: list[tuple[_Module, ast.ClassDef]] = []
        self.attrs: set[str] = set()
        self.any_method = False   # a computed getattr: any method of a reachable class may run
        self.everything = False   # names looked up at run time in a module's scope: judge all code
        self.entered: set[str] = set()

    # -- what a name refers to --------------------------------------------------------------------
    def name(self, mod: _Module, name: str, seen: frozenset = frozenset()) -> None:
        key = (mod.source.module, name)
        if key in seen:
            return
        seen = seen | {key}
        for node in mod.defs.get(name, []):
            self.add(mod, node)
        if name in mod.imports:
            target, attr = mod.imports[name]
            self.member(target, attr, seen)
        elif name not in mod.defs:
            for star in mod.stars:
                if star in self.modules:
                    self.name(self.modules[star], name, seen)

    def member(self, module: str, attr: str | None, seen: frozenset = frozenset()) -> None:
        """``module.attr`` (a definition, or a submodule), or the module itself when ``attr`` is None."""
        if attr is not None and f"{module}.{attr}" in self.modules:
            module, attr = f"{module}.{attr}", None
        if module not in self.modules:
            return
        self.enter(module)
        if attr is not None:
            self.name(self.modules[module], attr, seen)

    def chain(self, mod: _Module, parts: list[str]) -> None:
        """A dotted name ``a.b.c`` read in ``mod``: follow it through modules to the definition it names."""
        head, rest = parts[0], parts[1:]
        self.name(mod, head)
        if head in mod.defs or head not in mod.imports:
            return
        module, attr = mod.imports[head]
        if attr is not None:
            if f"{module}.{attr}" not in self.modules:
                return
            module = f"{module}.{attr}"
        for part in rest:
            if f"{module}.{part}" in self.modules:
                module = f"{module}.{part}"
                self.enter(module)
                continue
            if module in self.modules:
                self.name(self.modules[module], part)
            return
        if module in self.modules:  # the module object itself is passed around: any of its names may be used
            self.whole(self.modules[module])

    def whole(self, mod: _Module) -> None:
        for name in list(mod.defs):
            self.name(mod, name)

    def enter(self, module: str) -> None:
        """Importing ``module`` runs its package's __init__ files, its own top-level effects and its imports."""
        if module in self.entered:
            return
        self.entered.add(module)
        parts = module.split(".")
        for i in range(1, len(parts)):
            if ".".join(parts[:i]) in self.modules:
                self.enter(".".join(parts[:i]))
        mod = self.modules.get(module)
        if mod is None or not self.effects:
            return
        self.lines[mod.source.file].update(mod.import_lines)
        for node in mod.effects:
            self.add(mod, node)
        for node in mod.followed:
            self.refs(mod, node)
        for imported in mod.imported:
            for candidate in (imported, imported.rpartition(".")[0]):
                if candidate in self.modules:
                    self.enter(candidate)
                    break

    # -- a reachable node: its lines, and what it names -------------------------------------------
    def add(self, mod: _Module, node: ast.AST) -> None:
        if id(node) in self.done:
            return
        self.done.add(id(node))
        self.todo.append((mod, node))

    def process(self, mod: _Module, node: ast.AST) -> None:
        lines = self.lines[mod.source.file]
        if isinstance(node, ast.ClassDef):
            lines.update(range(_lines(node).start, max(_lines(node.body[0]).start, node.lineno + 1)))  # the header
            header = node.decorator_list + node.bases + [k.value for k in node.keywords]
            for part in header:
                self.refs(mod, part)
            for stmt in node.body:
                if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines.update(_lines(stmt))
                    self.refs(mod, stmt)
            self.classes.append((mod, node))
            return
        lines.update(_lines(node))
        self.refs(mod, node)

    def refs(self, mod: _Module, node: ast.AST) -> None:
        for action, arg in _ref_actions(mod, node):
            if action == "chain":
                self.chain(mod, arg)
            elif action == "attr":
                self.attrs.add(arg)
            elif action == "import":
                self.local_import(mod, arg)
            elif action == "everything":
                self.everything = True
            else:  # "any_method"
                self.any_method = True

    def defines(self, mod: _Module, name: str, depth: int = 0) -> bool:
        if name in mod.defs or name in mod.imports:
            return True
        return depth < 8 and any(star in self.modules and self.defines(self.modules[star], name, depth + 1)
                                 for star in mod.stars)

    def local_import(self, mod: _Module, node: ast.Import | ast.ImportFrom) -> None:
        """An import inside reachable code: what it names is used there (a whole module, conservatively)."""
        if isinstance(node, ast.Import):
            for a in node.names:
                for module in (a.name, a.name.split(".")[0]):
                    if module in self.modules:
                        self.enter(module)
                        self.whole(self.modules[module])
                        break
            return
        base = _absolute(mod.source, node.level or 0, node.module)
        for a in node.names:
            if a.name == "*":
                if base in self.modules:
                    self.enter(base)
                    self.whole(self.modules[base])
            else:
                self.member(base, a.name)

    def methods(self) -> bool:
        """Reachable classes' methods that a reachable attribute name (or torch) may call; True if any was new."""
        grew = False
        if not self.classes:
            return grew
        called = _torch_called()
        for mod, cls in self.classes:
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and id(stmt) not in self.done:
                    name = stmt.name
                    if self.any_method or name in self.attrs or name in called or (
                            name.startswith("__") and name.endswith("__")):
                        self.add(mod, stmt)
                        grew = True
        return grew

    def run(self, roots: list[tuple[str, str]]) -> dict[str, set[int]] | None:
        for module, attr in roots:
            if module not in self.modules or not self.defines(self.modules[module], attr):
                return None  # an entry the source does not show: judge everything
            self.enter(module)
            self.name(self.modules[module], attr)
        while True:
            while self.todo:
                self.process(*self.todo.pop())
                if self.everything:
                    return None
            if not self.methods():
                return self.lines


def dotted_name(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a plain name (the scans' and the notebook reader's view of a call)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def reachable_lines(sources: list[Source], roots: list[tuple[str, str]], *, effects: bool = True
                    ) -> dict[str, frozenset[int]] | None:
    """File -> the lines the ``roots`` (``(module, name)`` pairs) may run; None where that cannot be told
    from the source (an entry it does not define, names looked up at run time): judge every line then.
    ``effects=False``: only what the roots' own code names, not what importing a module runs besides (a
    tokenizer module's logging set-up, imported by the adapters for another test).

    Remembered for the last few (sources, roots): a challenge's source checks (its forbidden names, its unused
    imports, the integrity scan) ask the same question of the same files."""
    return _reachable(tuple(sources), tuple((str(m), str(n)) for m, n in roots), effects)


@functools.lru_cache(maxsize=32)
def _reachable(sources: tuple[Source, ...], roots: tuple[tuple[str, str], ...], effects: bool = True
               ) -> dict[str, frozenset[int]] | None:
    try:
        lines = _Reach(list(sources), effects).run(list(roots))
    except (SyntaxError, RecursionError, ValueError):
        return None
    return None if lines is None else {file: frozenset(found) for file, found in lines.items()}
