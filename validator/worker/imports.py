"""Import a student's staged package as its author would, in the worker, before any of its code runs.

:class:`StagedPackage` puts the staged root on ``sys.path`` (where the package's
``NAME-VERSION.dist-info`` lies too, so ``importlib.metadata.version()`` works, see
:mod:`validator.package`) and a path hook in front of ``sys.path_hooks`` that loads
every ``.py`` file under the root with :class:`_StudentLoader`. That loader differs
from Python's in three ways only:

- it always compiles the staged source (no ``__pycache__`` is read or written, so only
  the bytes that were scanned run; compiled extensions are never loaded);
- a ``SyntaxError`` caused by syntax newer than this Python (``type X = ...``, PEP 695
  generics, PEP 701 f-strings...) says so, naming the file, the line and the construct;
- each module gets its own builtins whose ``__import__`` hands out a *placeholder* for a
  third-party module that cannot be found at all (``wandb``, ``numpy`` under a CPU torch,
  ``regex``...). A placeholder survives what module-level code usually does with such
  a module (``import numpy.typing as npt``, ``from wandb import init``, ``npt.NDArray[np.float32]``
  or ``np.ndarray | None`` in an annotation, ``isinstance(x, np.ndarray)``, which is False);
  any real use (a call, instantiation, iteration, arithmetic, ``with``) raises
  ``ModuleNotFoundError`` naming the module and where it was imported. A name that an
  installed module lacks (``from torch.serialization import FILE_LIKE``, gone from the
  grader's newer torch) gets a placeholder the same way, named as that module's; one that
  ``typing`` gains in a later Python (``from typing import override``) gets typing_extensions'
  backport instead, which works.

A placeholder is only ever given to the student's own modules, and only for a top-level
module that really cannot be found: the real import runs first, so an installed module
is never shadowed; a module of the package itself (a typo, a relative import), a missing
submodule of an installed package, the grader's own packages, and an import inside
``try: ... except ImportError`` (or ``contextlib.suppress(ImportError)``) get Python's own
error, so a fallback the author wrote still runs. Placeholders never enter ``sys.modules``:
a library that probes for an optional module (``importlib.util.find_spec("numpy")``)
sees the environment as it is. A placeholder holds nothing but names and strings.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
import types
from typing import Any

NEVER_PLACEHOLDERS = frozenset({"validator", "reference"})  # the grader's own: a plain error, never a stand-in
_CATCHES = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
MAX_WHERE = 3  # importers named per placeholder module in a note
MAX_NOTED = 20  # placeholder modules named in the notes


def _under(path: str, root: str) -> bool:
    return path == root.rstrip(os.sep) or path.startswith(root)


def _folders(module: Any) -> list[str]:
    """Where a module was loaded from: its file, or a namespace package's folders (absolute); [] if neither."""
    file = getattr(module, "__file__", None)
    if file:
        return [os.path.abspath(file)]
    try:
        return [os.path.abspath(str(p)) for p in (getattr(module, "__path__", None) or [])]
    except Exception:  # noqa: BLE001 - an exotic __path__: known nowhere
        return []


class StagedPackage:
    """The import machinery for one staged package root (one per worker process)."""

    def __init__(self, root: str | os.PathLike):
        self.root = os.path.join(os.path.abspath(root), "")
        self.own = self._top_level_names()
        self.missing: dict[str, list[tuple[str, int]]] = {}  # placeholder module -> where imported: (file, line)
        self.missing_names: dict[str, list[tuple[str, int]]] = {}  # "module.name" an installed module lacks -> where
        self.backported: set[str] = set()  # "typing.name"s this Python lacks, taken from typing_extensions
        self.compiled: dict[str, list[tuple[str, int]]] = {}  # an own compiled extension not built -> where imported
        self._modules: dict[tuple[str, str], MissingModule] = {}  # (importing file, module) -> its placeholder
        self._guards: dict[str, list[tuple[int, int]]] = {}
        self._real_import = builtins.__import__
        self.builtins = dict(vars(builtins), __import__=self._import)
        self._loader = type("StudentLoader", (_StudentLoader,), {"package": self})
        self._installed = False

    # -- installing ------------------------------------------------------------------------------
    def install(self) -> None:
        """Put the root first on ``sys.path`` and load its files with the student loader."""
        if self._installed:
            return
        sys.path.insert(0, self.root.rstrip(os.sep))
        sys.path_hooks.insert(0, self._path_hook)
        self._forget_finders()
        self._forget_shadowed()
        importlib.invalidate_caches()
        self._installed = True

    def _forget_shadowed(self) -> None:
        """Drop modules the grader's process had imported under a name of the package (``tests``: pytest imports
        the student's own tests/__init__.py, or a project's) from a plain folder, so that the package's own wins,
        as in a fresh interpreter. Installed modules (site-packages, the standard library) and the grader's own
        stay: the staged root does not shadow what the worker already runs on."""
        installed = tuple(p for p in sys.path if p.rstrip(os.sep).endswith(("site-packages", "dist-packages")))
        installed += (os.path.dirname(os.__file__),)
        for name, module in list(sys.modules.items()):
            top = name.partition(".")[0]
            if top not in self.own or top in ("validator", "reference") or self.is_own(module, name):
                continue
            where = _folders(module)  # a file, or a namespace package's folders (``tests`` without __init__.py)
            if where and not any(_under(w, os.path.join(os.path.abspath(p), "")) for w in where for p in installed):
                del sys.modules[name]

    def uninstall(self) -> None:
        """Undo :meth:`install` and drop the package's modules (for tests that import in-process)."""
        if not self._installed:
            return
        sys.path[:] = [p for p in sys.path if p != self.root.rstrip(os.sep)]
        sys.path_hooks[:] = [h for h in sys.path_hooks if h != self._path_hook]
        self._forget_finders()
        for name, module in list(sys.modules.items()):
            if self.is_own(module, name):
                del sys.modules[name]
        importlib.invalidate_caches()
        self._installed = False

    def _forget_finders(self) -> None:
        for key in [k for k in sys.path_importer_cache if isinstance(k, str) and _under(os.path.abspath(k), self.root)]:
            del sys.path_importer_cache[key]

    def _path_hook(self, path: str) -> importlib.machinery.FileFinder:
        if not isinstance(path, str) or not _under(os.path.abspath(path or "."), self.root):
            raise ImportError("not a folder of the staged package")
        return importlib.machinery.FileFinder(path, (self._loader, [".py"]))

    def import_module(self, name: str) -> types.ModuleType:
        """Import ``name`` (a dotted module of the package) as its author's ``import`` would.

        A failed import leaves none of the package's modules it loaded on the way behind, as in a fresh
        interpreter: otherwise a later import of a sibling would find them in ``sys.modules`` and skip the
        ``__init__.py`` that failed, so whether an entry loads would depend on the order of the imports.
        """
        self.install()
        before = set(sys.modules)
        try:
            return importlib.import_module(name)
        except BaseException as exc:
            for added in set(sys.modules) - before:
                if self.is_own(sys.modules.get(added), added):
                    sys.modules.pop(added, None)
            if isinstance(exc, ModuleNotFoundError):
                self.explain_case(exc)
            raise

    def explain_case(self, exc: ModuleNotFoundError) -> None:
        """Add to the error of a module of the package that is not found the file or folder whose name differs from
        it only in case (``RoPE`` asked for, ``Rope.py`` there): macOS and Windows usually find it, Linux, where
        the grader runs, does not. Changes the error in place (its traceback stays the author's)."""
        name = getattr(exc, "name", None)
        if not isinstance(name, str) or name.partition(".")[0] not in self.own or getattr(exc, "_case_told", False):
            return
        folder, shown = self.root, []
        for part in name.split("."):
            try:
                entries = os.listdir(folder)
            except OSError:
                return
            if part in entries or f"{part}.py" in entries:
                match = part
            else:
                match = next((e for e in sorted(entries) if e.lower() in (part.lower(), f"{part.lower()}.py")), None)
                if match is None:
                    return
                shown.append((part, match))
            folder = os.path.join(folder, match)
        if not shown:
            return
        said = "; ".join(f"{asked!r} is asked for, {found!r} is there" for asked, found in shown)
        message = (f"{exc.msg} (names differ only in case: {said}. macOS and Windows usually ignore the case of "
                   "file names, Linux, where the grader runs, does not: write the import as the file is named)")
        exc.msg, exc.args, exc._case_told = message, (message,), True

    def is_own(self, module: Any, name: str) -> bool:
        """A module of the staged package: a file under the root, or a namespace package with a folder there (one
        of another folder's, left in the grader's process under a name of the package, is not)."""
        where = _folders(module)
        if where:
            return any(_under(w, self.root) for w in where)
        return name.partition(".")[0] in self.own

    def _top_level_names(self) -> frozenset[str]:
        try:
            entries = os.listdir(self.root)
        except OSError:
            return frozenset()
        names = set()
        for entry in entries:
            if entry.endswith(".py"):
                names.add(entry[:-3])
            elif not entry.startswith(".") and "." not in entry and os.path.isdir(os.path.join(self.root, entry)):
                names.add(entry)
        return frozenset(names)

    def relative(self, filename: str) -> str:
        return filename[len(self.root):] if filename.startswith(self.root) else os.path.basename(filename)

    # -- placeholders ----------------------------------------------------------------------------
    def _import(self, name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002 - __import__'s signature
        try:
            module = self._real_import(name, globals, locals, fromlist, level)
        except ImportError as exc:
            frame = sys._getframe(1)
            found = self._placeholder(name, fromlist, level, exc, frame) \
                if isinstance(exc, ModuleNotFoundError) else None
            if found is None:
                found = self._compiled(name, globals, fromlist, level, frame)
            if found is None:
                if isinstance(exc, ModuleNotFoundError):
                    self.explain_case(exc)
                raise
            return found
        own = fromlist and isinstance(getattr(module, "__name__", None), str) and module.__name__.partition(".")[0] \
            in self.own and self.is_own(module, module.__name__)
        if own:
            lacking = [n for n in fromlist if isinstance(n, str) and n != "*" and not hasattr(module, n)]
            if lacking:  # `from . import ext`: no submodule was found; Python looks for an attribute next
                self._compiled(module.__name__, None, lacking, 0, sys._getframe(1))
            return module
        if fromlist and not level:
            lacking = [n for n in fromlist if isinstance(n, str) and n != "*" and not hasattr(module, n)
                       and f"{getattr(module, '__name__', '')}.{n}" not in sys.modules]  # (as `from` itself looks)
            if lacking:
                return self._with_placeholders(module, lacking, sys._getframe(1)) or module
        return module

    def _with_placeholders(self, module: Any, lacking: list[str], frame) -> "types.ModuleType | None":
        """For ``from installed import name`` where the installed module has no such name (an API of the course's
        torch that the grader's lacks): a stand-in for the module that holds the real module's names and a
        placeholder for each missing one; None (Python's own ImportError) for the package's own modules, the
        grader's, and an import the author guards with ``try: ... except ImportError``."""
        name = getattr(module, "__name__", None)
        if not isinstance(name, str) or name.partition(".")[0] in NEVER_PLACEHOLDERS or self.is_own(module, name):
            return None
        if isinstance(module, MissingModule) or self._guarded(frame.f_code.co_filename, frame.f_lineno):
            return None
        where = (self.relative(frame.f_code.co_filename), frame.f_lineno)
        placeholders = {}
        for attr in lacking:
            backport = _backport(name, attr)
            if backport is not None:  # typing.override on a Python older than the course's: the real thing
                placeholders[attr] = backport
                self.backported.add(f"{name}.{attr}")
                continue
            seen = self.missing_names.setdefault(f"{name}.{attr}", [])
            if where not in seen and len(seen) < MAX_WHERE:
                seen.append(where)
            placeholders[attr] = _placeholder_class(name, attr, name, f"{where[0]} line {where[1]}",
                                                    what=f"{name}.{attr}")
        return _ModuleWithPlaceholders(module, placeholders)

    def _placeholder(self, name: str, fromlist, level: int, exc: ModuleNotFoundError, frame) -> Any:
        missing = exc.name
        if level or not missing or not isinstance(name, str) or "." in missing:
            return None  # a relative import, or a missing submodule of a module that exists
        if missing in self.own or missing in NEVER_PLACEHOLDERS or missing in sys.modules:
            return None
        if name != missing and not name.startswith(missing + "."):
            return None  # the module asked for exists; something it imports does not
        if self._guarded(frame.f_code.co_filename, frame.f_lineno):
            return None  # try/except ImportError: the author's fallback runs
        where = (self.relative(frame.f_code.co_filename), frame.f_lineno)
        seen = self.missing.setdefault(missing, [])
        if where not in seen and len(seen) < MAX_WHERE:
            seen.append(where)
        module = self._module(name, *where)
        return module if fromlist else self._modules[where[0], missing]

    def _compiled(self, name: str, globals, fromlist, level: int, frame) -> Any:
        """For an import of a compiled extension of the package itself that the submission holds only as a stub
        or sources (``cpp_extensions.pyi`` and C++ beside it, built by the author's CMake): the grader builds and
        loads no compiled code, so it gets a placeholder, as a module the environment lacks does, and the layers
        that never use it are graded (a real repository's __init__ imported one: every check scored 0). None for
        anything else, and for an import the author guards with ``try: ... except ImportError``."""
        try:
            package = (globals or {}).get("__package__") if level else None
            base = importlib.util.resolve_name("." * level + (name or ""), package) if level else name
        except (ImportError, ValueError, TypeError, AttributeError):
            return None
        if not isinstance(base, str) or base.partition(".")[0] not in self.own:
            return None
        if self._compiled_only(base):  # `import pkg.ext`, `from pkg.ext import f`
            missing = [base]
        else:  # `from pkg import ext`
            missing = [f"{base}.{n}" for n in fromlist or () if isinstance(n, str) and n != "*"
                       and f"{base}.{n}" not in sys.modules and self._compiled_only(f"{base}.{n}")]
        if not missing or self._guarded(frame.f_code.co_filename, frame.f_lineno):
            return None
        where = (self.relative(frame.f_code.co_filename), frame.f_lineno)
        for dotted in missing:
            placeholder = MissingModule(dotted, dotted, f"{where[0]} line {where[1]}", compiled=True)
            seen = self.compiled.setdefault(dotted, [])
            if where not in seen and len(seen) < MAX_WHERE:
                seen.append(where)
            parent = sys.modules.get(dotted.rpartition(".")[0])
            if parent is not None:
                setattr(parent, dotted.rpartition(".")[2], placeholder)
            if dotted == base:  # `import pkg.ext` / `from pkg.ext import f`: the placeholder is what it names
                return placeholder if fromlist else sys.modules.get(base.partition(".")[0], placeholder)
        return sys.modules.get(base)  # `from pkg import ext`: the package, which now holds the placeholder

    def _compiled_only(self, dotted: str) -> bool:
        """Whether a module of the package exists only as a compiled extension's stub or sources."""
        folder, _, leaf = os.path.join(self.root, *dotted.split(".")).rpartition(os.sep)
        try:
            entries = os.listdir(folder)
        except OSError:
            return False
        if f"{leaf}.py" in entries or leaf in entries:
            return False
        return any(e.startswith(f"{leaf}.") and e.rpartition(".")[2] in _COMPILED_SUFFIXES for e in entries)

    def _module(self, name: str, file: str, line: int) -> "MissingModule":
        """The placeholder for ``name`` that ``file`` gets (its errors name the line that first imported it)."""
        parts = name.split(".")
        parent = None
        for i in range(1, len(parts) + 1):
            dotted = ".".join(parts[:i])
            module = self._modules.get((file, dotted))
            if module is None:
                module = self._modules[file, dotted] = MissingModule(dotted, parts[0], f"{file} line {line}")
            if parent is not None:
                parent.__dict__[parts[i - 1]] = module
            parent = module
        return parent

    def _guarded(self, filename: str, line: int) -> bool:
        """Whether ``line`` of ``filename`` lies in a try body that catches ImportError (or in suppress(...))."""
        if filename not in self._guards:
            self._guards[filename] = guarded_lines(filename)
        return any(lo <= line <= hi for lo, hi in self._guards[filename])

    def notes(self) -> list[str]:
        """One sentence per placeholder module handed out so far (plain data, for the load reply)."""
        out = []
        for module, where in sorted(self.missing.items())[:MAX_NOTED]:
            files: dict[str, list[str]] = {}
            for file, line in where:
                files.setdefault(file, []).append(str(line))
            said = ", ".join(f"{f} line{'s' * (len(n) > 1)} {', '.join(n)}" for f, n in files.items())
            out.append(f"{module} is not installed in the grader's environment: importing it in {said} gave a "
                       f"placeholder so that grading goes on; code that uses {module} fails with an error naming it")
        if len(self.missing) > MAX_NOTED:
            out.append(f"{len(self.missing) - MAX_NOTED} more modules the grader's environment lacks were "
                       "replaced by placeholders")
        for module, where in sorted(self.compiled.items())[:MAX_NOTED]:
            said = ", ".join(f"{f} line {n}" for f, n in where)
            out.append(f"{module} is a compiled extension of your package that the submission holds only as a stub or "
                       f"sources; the grader builds and loads no compiled code, so importing it in {said} gave a "
                       f"placeholder so that grading goes on; code that uses {module} fails with an error naming it")
        if self.backported:
            out.append(f"this Python ({sys.version.split()[0]}) has no {', '.join(sorted(self.backported))}: "
                       "typing_extensions' backport of each was used, which behaves the same")
        for dotted, where in sorted(self.missing_names.items())[:MAX_NOTED]:
            said = ", ".join(f"{f} line {n}" for f, n in where)
            module, _, attr = dotted.rpartition(".")
            out.append(f"{module} has no {attr} in the grader's environment ({_version_of(module)}): importing it in "
                       f"{said} gave a placeholder so that grading goes on; code that uses {attr} fails with an error "
                       "naming it")
        return out


def guarded_lines(filename: str) -> list[tuple[int, int]]:
    """Line ranges of ``filename`` where a failed import is handled by the author's own code."""
    try:
        with open(filename, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    ranges = []
    for node in ast.walk(tree):
        body = None
        if isinstance(node, getattr(ast, "TryStar", ast.Try)) or isinstance(node, ast.Try):
            if any(h.type is None or _names(h.type) & _CATCHES for h in node.handlers):
                body = node.body
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and "suppress" in _names(call.func) and \
                        any(_names(a) & _CATCHES for a in call.args):
                    body = node.body
        for stmt in body or []:
            ranges.append((stmt.lineno, getattr(stmt, "end_lineno", None) or stmt.lineno))
    return ranges


def _names(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Name):
        return {node.id}
    if isinstance(node, ast.Attribute):
        return {node.attr}
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts)) if node.elts else set()
    return set()


def _unavailable(label: str, module: str, where: str, doing: str, what: str | None = None) -> ModuleNotFoundError:
    lacks = f"the module {module!r}" if what is None else f"{what} (its {_version_of(module)} has no such name)"
    return ModuleNotFoundError(
        f"{doing} {label}: the grader's environment does not have {lacks} (imported in {where}), "
        f"so code that uses it cannot run here; the graded code must not need {what or module}", name=module)


def _backport(module: str, name: str) -> Any:
    """``typing_extensions.name`` for a name that ``typing`` gains in a later Python (``override``, 3.12), else None."""
    if module != "typing":
        return None
    try:
        import typing_extensions
    except ImportError:
        return None
    return getattr(typing_extensions, name, None)


def _version_of(module: str) -> str:
    """``torch 2.13.0``: the installed distribution a module belongs to, as a note names it."""
    top = module.partition(".")[0]
    version = getattr(sys.modules.get(top), "__version__", None)
    return f"{top} {version}" if isinstance(version, str) else top


class _ModuleWithPlaceholders(types.ModuleType):
    """What ``from module import a, b`` receives when the installed module lacks some of the names: placeholders for
    those, the module's own objects for the rest. Handed to that one statement only."""

    def __init__(self, real: types.ModuleType, placeholders: dict[str, type]):
        super().__init__(real.__name__, getattr(real, "__doc__", None))
        self.__dict__["_real"] = real
        self.__dict__.update(placeholders)

    def __getattr__(self, name: str):
        return getattr(self.__dict__["_real"], name)


class _Missing(type):
    """The metaclass of placeholder attributes. They are classes, so ``isinstance(x, np.ndarray)`` is
    False, ``np.ndarray | None`` is a union and ``npt.NDArray[np.float32]`` is a placeholder again;
    calling, iterating, arithmetic and ``with`` raise, naming the module."""

    def __getattr__(cls, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        child = _placeholder_class(cls.__module__, f"{cls.__qualname__}.{name}", cls._missing_module,
                                   cls._missing_where, cls._missing_what)
        type.__setattr__(cls, name, child)
        return child

    def __getitem__(cls, item):
        return cls

    def __repr__(cls) -> str:
        if cls._missing_what:
            return f"<placeholder {cls._label()}: {cls._missing_what} is not in the grader's environment>"
        return f"<placeholder {cls._label()}: module {cls._missing_module!r} is not installed in the grader>"

    def _label(cls) -> str:
        return f"{cls.__module__}.{cls.__qualname__}"

    def __bool__(cls) -> bool:
        return True

    def _refuse(cls, doing: str):
        raise _unavailable(cls._label(), cls._missing_module, cls._missing_where, doing,
                           getattr(cls, "_missing_what", None))

    def __call__(cls, *args, **kwargs):
        cls._refuse("cannot call")

    def __iter__(cls):
        cls._refuse("cannot iterate over")

    def __len__(cls):
        cls._refuse("cannot take the length of")

    def __enter__(cls):
        cls._refuse("cannot enter")

    def __exit__(cls, *exc):
        return False


def _arithmetic(op: str):
    def refuse(cls, *args):
        cls._refuse(f"cannot apply {op} to")
    return refuse


for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "xor", "lshift", "rshift",
            "radd", "rsub", "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "rmatmul", "rand", "rxor",
            "neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "int", "float", "index", "complex"):
    setattr(_Missing, f"__{_op}__", _arithmetic(_op))  # not __or__: `X | None` in an annotation must work


def _placeholder_class(module: str, qualname: str, top: str, where: str, what: str | None = None) -> type:
    """A placeholder for ``module.qualname``, an attribute of a module (``top``'s) the grader lacks; ``what``: what
    is missing where it is not that module (a name an installed module lacks)."""
    name = qualname.rpartition(".")[2]
    return _Missing(name, (), {"__qualname__": qualname, "__module__": module, "_missing_module": top,
                               "_missing_where": where, "_missing_what": what, "__slots__": ()})


# what a compiled extension's stub, binary or sources are named (cpp_extensions.pyi, .cpython-311-x86_64-linux-gnu.so)
_COMPILED_SUFFIXES = frozenset({"pyi", "so", "pyd", "dylib", "c", "cc", "cpp", "cxx", "cu", "rs", "pyx"})


class MissingModule(types.ModuleType):
    """A module the grader's environment does not have (or a compiled extension of the package it does not build);
    every attribute is a placeholder class."""

    def __init__(self, name: str, top: str, where: str, compiled: bool = False):
        why = "a compiled extension the grader does not build" if compiled \
            else "not installed in the grader's environment"
        super().__init__(name, f"placeholder: module {top!r} is {why}")
        self.__dict__["_missing_module"] = top
        self.__dict__["_missing_where"] = where

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        child = _placeholder_class(self.__name__, name, self._missing_module, self._missing_where)
        self.__dict__[name] = child
        return child

    def __repr__(self) -> str:
        return f"<placeholder module {self.__name__!r}: not installed in the grader's environment>"


# -- syntax newer than this Python ---------------------------------------------------------------
_NEWER_SYNTAX = [
    # (first Python that parses it, what it is, how to write it instead, test on (message, line))
    ((3, 11), "`except*` (exception groups)", "catch the group with a plain `except`",
     lambda msg, line: re.match(r"\s*except\s*\*", line)),
    ((3, 12), "a `type` alias statement (PEP 695)", "write `Name = ...` or `Name: TypeAlias = ...`",
     lambda msg, line: re.match(r"\s*type\s+[A-Za-z_]\w*\s*(\[[^\]]*\])?\s*=", line)),
    ((3, 12), "type parameters in brackets (PEP 695 generics)", "declare them with typing.TypeVar",
     lambda msg, line: re.match(r"\s*((async\s+)?def|class)\s+[A-Za-z_]\w*\s*\[", line)),
    ((3, 12), "an f-string that reuses its own quotes, or holds a backslash or a comment inside {} (PEP 701)",
     "use the other kind of quotes inside the braces, or compute the value before the f-string",
     lambda msg, line: msg.startswith("f-string")),
    ((3, 14), "several exception types without parentheses (PEP 758)", "write `except (A, B):`",
     lambda msg, line: msg == "multiple exception types must be parenthesized"),
    ((3, 14), "a template string t'...' (PEP 750)", "use an f-string",
     lambda msg, line: re.search(r"(?<![\w.'\"])(t|tr|rt)['\"]", line, re.IGNORECASE)),
]


def newer_syntax(exc: SyntaxError, shown: str) -> SyntaxError | None:
    """The same error, saying which newer syntax the line uses, when that is what this Python cannot parse."""
    line = exc.text or ""
    here = sys.version_info[:2]
    for since, what, instead, test in _NEWER_SYNTAX:
        if here < since and test(exc.msg or "", line):
            message = (f"{shown} line {exc.lineno} uses syntax this grader's Python ({here[0]}.{here[1]}) cannot "
                       f"parse ({what}, new in Python {since[0]}.{since[1]}): {instead}")
            return SyntaxError(message, (exc.filename, exc.lineno, exc.offset, exc.text,
                                         getattr(exc, "end_lineno", None), getattr(exc, "end_offset", None)))
    return None


class _StudentLoader(importlib.machinery.SourceFileLoader):
    """Python's source loader, compiling the staged bytes every time, with the package's own builtins."""

    package: StagedPackage  # set on the per-package subclass

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self.package.builtins
        super().exec_module(module)

    def get_code(self, fullname: str) -> types.CodeType:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)

    def source_to_code(self, data, path, *, _optimize=-1):
        try:
            return compile(data, path, "exec", dont_inherit=True, optimize=_optimize)
        except SyntaxError as exc:
            better = newer_syntax(exc, self.package.relative(str(path)))
            if better is None:
                raise
            raise better from None
