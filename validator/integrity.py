"""A grader-side scan of every Python file of a submission: what it uses must be on the challenge's allowlist.

Runs in the grader, never in the worker, on the bytes the importer will read,
decoded exactly as the importer decodes them (a PEP 263 coding cookie is
honoured, and a cookie other than UTF-8 is itself a finding: ``utf-7`` lets
``F.embedding`` hide as ``F+AC4-embedding``). It follows the submission's own
imports to the helper modules beside ``layers.py`` (or across a package), and
scans every other Python file the worker gets a copy of too.

Each challenge states what a solution may use (:class:`Allowlist`: a catalogue-wide
default that a spec extends or narrows): modules, torch's namespaces, a few names of
``os`` and ``sys``. A *finding* is a use of anything else (``timeit``, ``pkgutil``,
``torch.hub``, ``torch._VF``...), of a construct that hides what the code does
(threads, processes, ``ctypes``, dynamic code, torch internals, ``gc``, ``inspect``,
frames, an attribute looked up by a computed name, a module passed around as a
value, a jaxtyping shape that jaxtyping would evaluate as code), or of an API the
challenge forbids, by its name or as a method (``x.softmax(dim)`` is
``torch.Tensor.softmax``). Names are judged by what they are in the grader's own
torch and numpy, not by how they are spelled: ``F.torch.hub`` is ``torch.hub``.

An import that is never used is *advice*: real student code leaves such lines
behind, and an unused name does nothing. So is a finding outside the code the
graded entries may run (see :mod:`validator.reachability`), and one in a file that
no import names (only a dynamic load, itself a finding, could run it).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import fnmatch
import functools
import importlib
import importlib.machinery
import inspect
import io
import itertools
import re
import sys
import tokenize
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from validator.intake import MAX_SOURCE_BYTES as MAX_FILE_BYTES  # one cap for every reader of a submission
from validator.reachability import Source, child_nodes, dotted_name, parsed, reachable_lines

MAX_FILES = 20     # files reached by following the imports of layers.py
MAX_HELPERS = 20   # other Python files beside layers.py: as many as the intake copies into the worker

# construct id -> dotted names (a name covers its attributes: "torch._C" covers "torch._C._foo")
CONSTRUCTS: dict[str, tuple[str, ...]] = {
    "threads": ("threading", "_thread", "concurrent", "asyncio", "torch.multiprocessing", "queue"),
    "processes": ("multiprocessing", "subprocess", "pty", "os.fork", "os.forkpty", "os.system", "os.popen",
                  "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve",
                  "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp", "os.execl", "os.execle",
                  "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.kill",
                  "signal", "webbrowser"),
    "ctypes": ("ctypes", "_ctypes", "cffi", "mmap"),
    # what runs code the scan cannot read: source in a string, a module named at run time, a debugger or profiler
    "dynamic_code": ("exec", "eval", "compile", "__import__", "breakpoint", "importlib", "runpy", "builtins",
                     "__builtins__", "marshal", "pickle", "types.CodeType", "types.FunctionType", "timeit", "code",
                     "codeop", "pkgutil", "zipimport", "imp", "site", "pdb", "bdb", "cProfile", "profile", "trace",
                     "doctest"),
    "torch_internals": ("torch._C", "torch.utils._python_dispatch", "torch._dispatch", "torch.overrides",
                        "torch.library", "torch._ops", "torch._library", "torch.profiler", "torch.autograd.profiler",
                        "torch._subclasses", "torch._dynamo", "torch.fx", "torch.utils._mode_utils",
                        "__torch_dispatch__", "__torch_function__"),
    "gc": ("gc",),
    "inspect": ("inspect", "dis", "traceback"),
    "frames": ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.modules",
               "sys.addaudithook", "sys.meta_path", "sys.path_hooks", "threading.settrace"),
    "computed_getattr": (),  # an attribute looked up by a name the scan cannot read, on a module or a class
    "module_value": (),      # a module passed around as a value: what is taken from it cannot be told
    "not_allowed": (),       # a module or name outside the challenge's allowlist
    "coding_cookie": (),     # a source encoding other than UTF-8
}

# Names under a construct's prefix that are no such construct: reading a package's metadata or its data files
# is not dynamic code, though both live in importlib (CS336's __init__.py reads its own version). Not listed:
# entry points and distributions (an entry point's load() imports by name).
NOT_CONSTRUCTS: tuple[str, ...] = (
    "importlib.metadata.version", "importlib.metadata.metadata", "importlib.metadata.requires",
    "importlib.metadata.files", "importlib.metadata.packages_distributions", "importlib.metadata.PackageNotFoundError",
    "importlib.resources.as_file",
    # a named range around the layer's own code (a real repository marks its attention's steps): it starts no
    # profiler and stops none, and the grader's cross-check reads a student's range as the range it is
    "torch.profiler.record_function", "torch.autograd.profiler.record_function",
    "torch.profiler.ProfilerActivity",  # an enum of what a profiler would record (a device helper's constant)
)
# importlib.resources readers import the package they are given by name: a literal name is followed like an
# import, the module's own name (__name__, __package__) is no import at all, any other name is dynamic code.
_RESOURCE_READERS = ("importlib.resources.files", "importlib.resources.read_text", "importlib.resources.read_binary",
                     "importlib.resources.open_text", "importlib.resources.open_binary", "importlib.resources.path",
                     "importlib.resources.is_resource", "importlib.resources.contents")
_OWN_MODULE = {"__name__", "__package__"}
_READ_MODULES = {"importlib.metadata", "importlib.resources"}  # importing them (and using nothing) reads nothing

DESCRIPTIONS = {
    "threads": "threads (the op recorder cannot see into another thread)",
    "processes": "processes or signals",
    "ctypes": "native code access (ctypes)",
    "dynamic_code": "dynamic code (exec/eval/compile/__import__, importlib, runpy, pkgutil, timeit, code, a "
                    "debugger or profiler): code the scan cannot read",
    "torch_internals": "reflective access to torch internals (torch._C, dispatch modes, profiler)",
    "gc": "the garbage collector's object graph (gc)",
    "inspect": "introspection of running code (inspect)",
    "frames": "interpreter frames and hooks (sys._getframe, sys.modules, ...)",
    "computed_getattr": "an attribute looked up by a name the scan cannot read (getattr, __dict__, vars, "
                        "operator.attrgetter) on a module or a class",
    "module_value": "a module passed around as a value (what is taken from it cannot be checked)",
    "not_allowed": "not on this challenge's allowlist",
    "coding_cookie": "a source encoding other than UTF-8",
}

# -- what a solution may use -------------------------------------------------------------------------------------
# One entry is "m" (the names module m defines: functions, classes, constants; not its submodules, nor the modules
# it imports), "m.*" (m and every submodule of it), or "m.name" (one name of m, and everything under it). A name
# with a private component (_x) is allowed only by an entry that names it. Names are compared by what they are:
# os.path is posixpath, and torch.nn.functional.torch is torch.
DEFAULT_ALLOWED: tuple[str, ...] = (
    # torch: its own functions, classes and dtypes, and the namespaces layers and their training code use
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.nn.parameter", "torch.nn.common_types",
    "torch.nn.modules.*", "torch.nn.utils.*", "torch.nn.attention.*", "torch.autograd", "torch.autograd.function",
    "torch.autograd.grad_mode", "torch.linalg", "torch.special", "torch.fft", "torch.functional", "torch.types",
    "torch.random", "torch.version", "torch.return_types", "torch.testing", "torch.cuda", "torch.mps", "torch.cpu",
    "torch.accelerator", "torch.backends.*", "torch.amp.*", "torch.distributions.*", "torch.optim.*",
    "torch.utils.data.*", "torch.utils.checkpoint",
    # the array, shape and typing libraries of the course (CS336 declares them)
    "numpy", "numpy.typing", "numpy.random", "numpy.linalg", "einops", "einops.layers.torch", "einx", "jaxtyping",
    "beartype", "typeguard", "regex",
    # configuration classes (a model's config as a pydantic model: BaseModel, Field), and the logging, progress and
    # configuration tools a package's helpers use (a logger module with rich's handler reading an omegaconf config)
    "pydantic", "rich.*", "omegaconf.*", "tqdm.*",
    # the standard library's maths, data, typing and text modules
    "__future__", "math", "cmath", "numbers", "random", "statistics", "fractions", "decimal", "typing",
    "typing_extensions", "types.SimpleNamespace", "abc", "enum", "dataclasses", "collections", "collections.abc",
    "functools", "itertools", "operator", "copy", "contextlib", "warnings", "logging", "re", "string", "textwrap",
    "json", "time", "heapq", "bisect", "pathlib",
    # a few names of os and sys: paths, the environment, versions, the standard streams
    "os.path", "os.environ", "os.getenv", "os.sep", "os.getcwd", "os.makedirs", "os.listdir", "os.cpu_count",
    "os.fspath", "os.PathLike", "sys.version_info", "sys.float_info", "sys.maxsize", "sys.platform", "sys.stdout",
    "sys.stderr",
    # reading the package's own metadata and data files (CS336's __init__.py reads its version)
    *NOT_CONSTRUCTS, *_RESOURCE_READERS,
)
# Names of allowed modules that load or compile code (a pickle, an import hook, a compiled graph the op recorder
# does not see): not allowed unless a spec adds them by name.
DEFAULT_EXCLUDED: tuple[str, ...] = ("torch.load", "torch.compile", "numpy.load", "jaxtyping.install_import_hook",
                                     "typeguard.install_import_hook", "pydantic.ImportString",
                                     "pydantic.types.ImportString")
ENTRY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\.\*)?$")


@dataclass(frozen=True)
class Allowlist:
    """What a solution may use: ``allowed`` entries (see DEFAULT_ALLOWED), less the ``excluded`` names."""

    allowed: tuple[str, ...] = DEFAULT_ALLOWED
    excluded: tuple[str, ...] = DEFAULT_EXCLUDED

    @classmethod
    def changed(cls, add: tuple[str, ...] = (), remove: tuple[str, ...] = ()) -> Allowlist:
        """The default with ``add`` entries allowed (an excluded name among them is allowed again) and ``remove``
        taken away (a default entry is dropped; any other name becomes excluded)."""
        return _changed(tuple(add), tuple(remove))

    @functools.cached_property
    def roots(self) -> frozenset[str]:
        return frozenset(e.split(".")[0] for e in self.allowed + self.excluded)

    @functools.cached_property
    def by_root(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for entry in self.allowed:
            out.setdefault(entry.split(".")[0], []).append(entry)
        return {root: tuple(entries) for root, entries in out.items()}


DEFAULT_POLICY = Allowlist()


@functools.lru_cache(maxsize=64)
def _changed(add: tuple[str, ...], remove: tuple[str, ...]) -> Allowlist:
    if not add and not remove:
        return DEFAULT_POLICY
    allowed = [e for e in DEFAULT_ALLOWED if e not in remove] + [e for e in add if e not in DEFAULT_ALLOWED]
    excluded = [e for e in DEFAULT_EXCLUDED if e not in add]
    excluded += [e for e in remove if e not in DEFAULT_ALLOWED and e not in excluded]
    return Allowlist(tuple(dict.fromkeys(allowed)), tuple(excluded))


# -- what a dotted name is in the grader's own environment -------------------------------------------------------
_UNKNOWN = object()


@dataclass(frozen=True)
class _Named:
    canon: str        # the name through the modules it passes (torch.nn.functional.torch.hub is torch.hub)
    module: str       # the module its last component belongs to, by the same rule
    obj: object       # the object itself; _UNKNOWN where the environment cannot say without importing more
    is_module: bool


_IMPORT_FAILED: set[str] = set()
_WALKS: dict[str, _Named] = {}


def _root_module(root: str, may_import: bool) -> types.ModuleType | None:
    """The top-level module ``root`` as the grader has it; imported only for an allowlist's own roots."""
    module = sys.modules.get(root)
    if module is None and may_import and root not in _IMPORT_FAILED:
        try:
            module = importlib.import_module(root)
        except Exception:  # noqa: BLE001 - not installed, or broken here: the name is judged as written
            _IMPORT_FAILED.add(root)
            return None
    return module if isinstance(module, types.ModuleType) else None


def _submodule(canon: str, path, part: str) -> tuple[object, str, object] | None:
    """(module or None, name, search path) for a submodule not bound in its parent; None if there is none."""
    name = f"{canon}.{part}"
    loaded = sys.modules.get(name)
    if isinstance(loaded, types.ModuleType):
        return loaded, loaded.__name__, getattr(loaded, "__path__", None)
    if not path:
        return None
    try:
        spec = importlib.machinery.PathFinder.find_spec(name, list(path))  # finds, never runs the module
    except Exception:  # noqa: BLE001
        return None
    return (None, name, spec.submodule_search_locations) if spec is not None else None


def _walk(name: str, may_import: bool = False) -> _Named:
    """Follow ``name`` through the grader's modules (their ``vars``, never a module ``__getattr__``)."""
    hit = _WALKS.get(name)
    if hit is not None:
        return hit
    parts = name.split(".")
    root = _root_module(parts[0], may_import)
    if root is None:
        return _Named(name, parts[0], _UNKNOWN, False)
    try:
        named = _follow(root, parts)
    except Exception:  # noqa: BLE001 - an object that refuses to be looked at statically
        named = _Named(name, parts[0], _UNKNOWN, False)
    if len(_WALKS) > 50_000:
        _WALKS.clear()
    _WALKS[name] = named
    return named


def _follow(root: types.ModuleType, parts: list[str]) -> _Named:
    obj: object = root
    canon = module = root.__name__
    path = getattr(root, "__path__", None)
    is_module = True
    for i, part in enumerate(parts[1:], 1):
        if not is_module:
            rest = parts[i:]
            for attr in rest:
                if obj is _UNKNOWN:
                    break
                try:
                    obj = inspect.getattr_static(obj, attr)
                except AttributeError:
                    obj = _UNKNOWN
            return _Named(".".join([canon, *rest]), module, obj, False)
        members = vars(obj) if isinstance(obj, types.ModuleType) else {}
        if part in members:
            value = members[part]
            if isinstance(value, types.ModuleType):
                obj, canon, path = value, value.__name__, getattr(value, "__path__", None)
                module = canon
            else:
                obj, canon, is_module = value, f"{canon}.{part}", False
            continue
        sub = _submodule(canon, path, part)
        if sub is not None:
            obj, canon, path = sub
            obj = _UNKNOWN if obj is None else obj
            module = canon
            continue
        return _Named(".".join([canon, *parts[i:]]), module, _UNKNOWN, False)  # not bound now: an unknown name
    return _Named(canon, module, obj, is_module)


def _covers(prefix: str, name: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _private(name: str) -> bool:
    return any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in name.split(".")[1:])


@functools.lru_cache(maxsize=1024)
def _entry(entry: str) -> tuple[str, str, object]:
    """(kind, canonical name, object) of an allowlist entry: kind is "tree", "module" or "name"."""
    tree = entry.endswith(".*")
    base = entry[:-2] if tree else entry
    named = _walk(base, may_import=True)
    if tree:
        return "tree", named.canon if named.is_module else base, _UNKNOWN
    if named.is_module:
        return "module", named.canon, named.obj
    if named.obj is _UNKNOWN and "." not in base:
        return "module", base, _UNKNOWN
    return "name", named.canon, named.obj


def allows(policy: Allowlist, name: str, named: _Named | None = None) -> bool:
    """Whether ``policy`` allows the absolute dotted ``name`` (a module, or a name reached through modules)."""
    named = named or _walk(name, may_import=name.split(".")[0] in policy.roots)
    for entry in policy.excluded:
        kind, canon, obj = _entry(entry)
        if _covers(canon, named.canon) or _covers(entry, name) or (obj is not _UNKNOWN and obj is named.obj):
            return False
    roots = {name.split(".")[0], named.canon.split(".")[0]}
    entries = [_entry(e) for root in roots for e in policy.by_root.get(root, ())]
    if _private(named.canon):
        return any(_private(canon) and _covers(canon, named.canon) for _, canon, _ in entries)
    for kind, canon, _ in entries:
        if kind == "tree" and _covers(canon, named.module):
            return True
        if kind == "module" and named.module == canon:
            return True
        if kind == "name" and _covers(canon, named.canon):
            return True
    return False


@functools.lru_cache(maxsize=64)
def _banned_objects(banned: tuple[str, ...]) -> dict[int, tuple[str, object]]:
    """id -> (API, object) for each banned name the grader's torch defines: a re-export is the same object."""
    out = {}
    for api in banned:
        if any(c in api for c in "*?["):
            continue
        named = _walk(api)
        if named.obj is not _UNKNOWN and callable(named.obj):
            out[id(named.obj)] = (api, named.obj)
    return out


@functools.lru_cache(maxsize=64)
def _banned_names(banned: tuple[str, ...]) -> tuple[tuple[str, str, bool], ...]:
    """(last component or its pattern, API, whether it is a pattern) for each banned API: the name a method or
    an alias would use."""
    return tuple((last, api, any(c in last for c in "*?[")) for api in banned
                 if not (last := api.rsplit(".", 1)[-1]).startswith("*"))


@functools.lru_cache(maxsize=8192)
def _banned_name(attr: str, banned: tuple[str, ...]) -> str | None:
    """The banned API whose last component ``attr`` is (or matches), else None. Remembered: a scan asks it for
    every attribute of every file, for each challenge, and the same few hundred names come back."""
    for pattern, api, is_pattern in _banned_names(banned):
        if attr == pattern or (is_pattern and fnmatch.fnmatchcase(attr, pattern)):
            return api
    return None


@functools.lru_cache(maxsize=256)
def _tensor_method(attr: str) -> bool:
    import torch

    try:
        inspect.getattr_static(torch.Tensor, attr)
    except AttributeError:
        return False
    return True


@functools.lru_cache(maxsize=256)
def _tensor_class(bases: tuple[str, ...]) -> bool:
    """Whether a class with these (resolved) bases is a tensor, whose ``self.softmax`` is Tensor.softmax."""
    import torch

    for base in bases:
        obj = _walk(base).obj if base else _UNKNOWN
        if isinstance(obj, type) and issubclass(obj, torch.Tensor):
            return True
    return False


# -- findings ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Finding:
    file: str       # the file's name as the student knows it (layers.py, helpers.py)
    line: int
    what: str       # a construct id, or the forbidden API's dotted name
    code: str       # the source line, stripped
    construct: bool  # True for an integrity construct, False for an API the challenge forbids
    unused_import: bool = False  # an import whose name is never used: advice only
    reachable: bool = True  # in code the graded entries may run (validator.reachability); else advice only
    name: str = ""  # what the finding is about, as resolved (timeit.Timer, torch.hub.load), where it says more
    indirect: bool = False  # a forbidden API reached as a method or through a name (x.softmax): marks for review
    like: str = ""  # the forbidden API whose name an indirect use has

    def label(self) -> str:
        if not self.construct:
            if self.indirect and self.name.startswith("."):
                return (f"uses `{self.name}` of an object, taken for {self.what}, which this challenge forbids (a "
                        "Tensor method, or a module kept in a variable, is the library's own)")
            if self.indirect and self.like and self.like != self.what:
                return f"uses {self.what}, another name of {self.like}"
            if self.indirect and self.name and self.name != self.what:
                return f"uses {self.what} (written `{self.name}`)"
            return f"uses {self.what}"
        if self.what == "not_allowed":
            return f"{self.name} is not on this challenge's allowlist (the challenge page lists what you may use)"
        if self.what == "module_value":
            return f"passes the module {self.name} around as a value (what is taken from it cannot be checked)"
        text = DESCRIPTIONS.get(self.what, self.what)
        return f"{text}: {self.name}" if self.name and self.name != self.what else text

    def describe(self) -> str:
        if self.unused_import:
            return f"{self.file}:{self.line}: `{self.code}` imports {self.what} but never uses it"
        if not self.reachable:
            return (f"{self.file}:{self.line}: `{self.code}` {self.label().removeprefix('uses ')} in code the graded "
                    "layer never runs (it costs nothing here; the layer itself must not use it)")
        label = self.label()
        if self.construct and self.name and label.endswith(f": {self.name}") and self.name in self.code:
            label = label.removesuffix(f": {self.name}")  # the quoted line already shows the name
        return f"{self.file}:{self.line}: `{self.code}`: {label}"

    @property
    def advice_only(self) -> bool:
        """Costs no points: an import never used, or a finding outside the code the entries run."""
        return self.unused_import or not self.reachable

    @property
    def review(self) -> bool:
        """A person should look: a construct, or a forbidden API reached by a name the scan had to infer."""
        return self.construct or self.indirect


class Unreadable(Exception):
    """A file of the submission cannot be read or parsed; the message says which and why."""


def read_bytes(path: Path, limit: int = MAX_FILE_BYTES) -> bytes:
    """At most ``limit`` bytes of a regular file, never through a link (the submission intake's rules)."""
    from validator.intake import IntakeError, read_submission_file

    try:
        return read_submission_file(path, cap=limit, what=Path(path).name)
    except IntakeError as exc:
        raise Unreadable(str(exc)) from None


def decode_source(name: str, data: bytes) -> tuple[str, list[Finding]]:
    """Decode as the importer does (PEP 263 cookie or BOM, default UTF-8); a non-UTF-8 cookie is a finding."""
    try:
        encoding, lines = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise Unreadable(f"{name}: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    findings = []
    if encoding not in ("utf-8", "utf-8-sig"):
        where = next((i for i, l in enumerate(lines, 1) if b"coding" in l), 1)
        code = lines[where - 1].decode("latin-1").strip() if lines else ""
        findings.append(Finding(name, where, "coding_cookie", f"{code} ({encoding})", True))
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise Unreadable(f"{name} cannot be decoded as {encoding}: {exc}") from None
    return text.lstrip("\ufeff"), findings


def _matches_api(name: str, banned: tuple[str, ...] | list[str]) -> str | None:
    name = name.replace("torch.nn.modules.sparse.", "torch.nn.")
    for api in banned:
        if ("*" in api or "?" in api or "[" in api) and fnmatch.fnmatchcase(name, api):
            return api if api == name else name
        if api == name:
            return api
    return None


_CONSTRUCT_OF_PREFIX = {p: c for c, prefixes in reversed(CONSTRUCTS.items()) for p in prefixes}
_READERS = frozenset(NOT_CONSTRUCTS + _RESOURCE_READERS)


def _construct_of(name: str, allow: frozenset[str] | set[str]) -> str | None:
    """The construct ``name`` (or a name it is under) belongs to, unless the challenge allows it."""
    parts = name.split(".")
    prefixes = [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    if any(p in _READERS for p in prefixes):
        return None  # a resource reader's argument is judged where it is called (_Collector.call)
    for prefix in prefixes:
        construct = _CONSTRUCT_OF_PREFIX.get(prefix)
        if construct is not None and construct not in allow:
            return construct
    return None


# -- pass one: what a file uses, as plain data (independent of the challenge) ---------------------------------------
_BUILTINS = {"exec", "eval", "compile", "__import__", "__builtins__", "breakpoint"}
_ATTR_BUILTINS = {"getattr", "setattr", "delattr", "vars", "globals", "locals"}
_DUNDERS = {"__globals__": "frames", "__code__": "frames", "__closure__": "frames", "__builtins__": "dynamic_code",
            "__subclasses__": "frames", "__torch_dispatch__": "torch_internals",
            "__torch_function__": "torch_internals", "__getattribute__": "computed_getattr",
            "__loader__": "dynamic_code", "__spec__": "dynamic_code"}
_CLASS_WALKS = {"__class__", "__mro__", "__bases__", "__base__"}
_SELF = {"self", "cls"}
_FOLD_BUILTINS = {"chr", "str", "bytes", "bytearray", "ord", "reversed", "map", "list", "tuple", "sorted", "int",
                  "hex", "oct", "bin", "len"}
_STR_METHODS = {"join", "lower", "upper", "replace", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix",
                "capitalize", "title", "swapcase", "casefold", "decode", "encode", "zfill", "center", "ljust",
                "rjust"}
_PY_BUILTINS = frozenset(dir(builtins))
_OPAQUE = object()   # a value built from constants only, in a way the scan does not compute
_MAX_FOLD = 64       # at most as many candidate values per expression
_MAX_TEXT = 4096     # ... of at most as many characters
_DIM_CALLS = {"min", "max", "abs", "int", "round"}


@dataclass(frozen=True)
class _Facts:
    """One file's uses, resolved through its own imports: what the judgement of pass two needs."""

    lines: tuple[str, ...]
    imports: tuple[tuple[int, str, str], ...]    # (line, bound name, dotted name)
    statements: tuple[tuple[int, str, tuple[str, ...]], ...]
    stars: tuple[tuple[int, str], ...]           # (line, module) of each `from module import *`
    names: tuple[tuple[int, str, bool, bool], ...]  # (line, resolved name, whole, used as a value)
    bare: tuple[tuple[int, str, bool], ...]      # (line, name, used as a value): a name no statement binds
    attrs: tuple[tuple[int, str, tuple[str, ...] | None], ...]  # (line, attribute, bases of self's class)
    constructs: tuple[tuple[int, str, str], ...]  # (line, construct id, name)
    used: frozenset[str]
    defined_attrs: frozenset[str]                # attributes its classes define: methods, `self.x = ...`


def _parse(source: str, file: str) -> ast.Module:
    try:
        return parsed(source, file)
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, nesting too deep
        raise SyntaxError(str(exc) or type(exc).__name__) from None


class _Collector:
    def __init__(self, file: str, source: str):
        self.file = file
        self.lines = tuple(source.splitlines())
        self.tree = _parse(source, file)
        self.extra: list[ast.AST] = []         # string annotations, parsed: typing and beartype evaluate them
        self.parents: dict[int, ast.AST] = {}
        self.aliases: dict[str, str] = {}      # bound name -> dotted name it stands for
        self.imports: list[tuple[int, str, str]] = []
        self.stars: list[tuple[int, str]] = []
        self.used: set[str] = set()
        self.names: set[tuple[int, str, bool, bool]] = set()
        self.bare: set[tuple[int, str, bool]] = set()
        self.attrs: set[tuple[int, str, tuple[str, ...] | None]] = set()
        self.constructs: set[tuple[int, str, str]] = set()
        self.followed: list[str] = []          # modules named by literal strings that a call imports
        self.probes: set[int] = set()          # the called names of availability probes (see probe)
        self.bindings: dict[str, list[ast.AST | None]] = {}  # name -> values bound to it (None: not known)
        self.alias_values: set[int] = set()    # value nodes of `name = module.attr` aliases
        self.bound_targets: set[int] = set()   # Name targets whose bound value is recorded
        self.defined_attrs: set[str] = set()   # attributes the file's classes define (methods, self.x = ...)

    # -- bookkeeping -------------------------------------------------------------------------------------------
    def bind(self, name: str, value: ast.AST | None) -> None:
        self.bindings.setdefault(name, []).append(value)

    def collect_bindings(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    self.bind_target(target, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                self.bound_targets.add(id(node.target))
                self.bind(node.target.id, node.value if isinstance(node, ast.AnnAssign) else None)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
                self.bind_loop(node.target, node.iter)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bind(node.name, None)
            elif isinstance(node, ast.arguments):
                for a in node.args + node.kwonlyargs + node.posonlyargs + [node.vararg, node.kwarg]:
                    if a is not None:
                        self.bind(a.arg, None)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) \
                    and id(node) not in self.bound_targets:
                self.bind(node.id, None)  # with ... as x, except ... as x, walrus, del, match
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self.bind(node.name, None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    self.bind(a.asname or a.name.split(".")[0], None)

    def bind_target(self, target: ast.AST, value: ast.AST | None) -> None:
        if isinstance(target, ast.Name):
            self.bound_targets.add(id(target))
            self.bind(target.id, value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
                else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self.bind_target(t, v)

    def bind_loop(self, target: ast.AST, iterable: ast.AST) -> None:
        if isinstance(target, ast.Name) and isinstance(iterable, (ast.Tuple, ast.List, ast.Set)):
            self.bound_targets.add(id(target))
            for element in iterable.elts:
                self.bind(target.id, element)

    def resolve(self, dotted: str) -> str | None:
        """The dotted name an expression stands for; None for a local name that is no import or builtin."""
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
        elif head in _BUILTINS and head not in self.bindings:
            base = head
        else:
            return None
        return base + (f".{rest}" if rest else "")

    def construct(self, line: int, what: str, name: str = "") -> None:
        self.constructs.add((line, what, name))

    # -- string annotations and jaxtyping shapes: text that something evaluates -------------------------------
    def annotation_strings(self, nodes: list[ast.AST]) -> None:
        """Parse string annotations as code (typing.get_type_hints and runtime typecheckers eval them)."""
        todo: list[tuple[ast.AST, int]] = []
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                for a in args.args + args.kwonlyargs + args.posonlyargs + [args.vararg, args.kwarg]:
                    if a is not None and a.annotation is not None:
                        todo.append((a.annotation, 0))
                if node.returns is not None:
                    todo.append((node.returns, 0))
            elif isinstance(node, ast.AnnAssign):
                todo.append((node.annotation, 0))
        while todo:
            annotation, depth = todo.pop()
            for const in self.annotation_constants(annotation):
                if depth > 2 or len(const.value) > _MAX_TEXT:
                    continue
                try:
                    expr = ast.parse(const.value.strip(), mode="eval").body
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    continue
                for n in ast.walk(expr):
                    for attr in ("lineno", "end_lineno"):
                        if attr in n._attributes:
                            setattr(n, attr, const.lineno)
                    if isinstance(n, ast.Call):  # a type is no call: this is code that an evaluation would run
                        self.construct(const.lineno, "dynamic_code", "code in a string annotation")
                self.extra.append(expr)
                todo.append((expr, depth + 1))

    def annotation_constants(self, annotation: ast.AST) -> list[ast.Constant]:
        """String constants of an annotation, but not jaxtyping shapes nor Literal values (not code)."""
        found, stack = [], [annotation]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append(node)
                continue
            if isinstance(node, ast.Subscript):
                head = dotted_name(node.value)
                resolved = (self.resolve(head) if head else None) or ""
                if resolved.startswith("jaxtyping.") or resolved.rsplit(".", 1)[-1] == "Literal":
                    stack.append(node.value)
                    continue
            stack.extend(ast.iter_child_nodes(node))
        return found

    def jaxtyping_shape(self, node: ast.Subscript) -> None:
        """jaxtyping evaluates a symbolic dimension (``"n+1"``) with eval, inside an f-string: only names, numbers
        and arithmetic may appear there."""
        shape = node.slice.elts[1] if isinstance(node.slice, ast.Tuple) and len(node.slice.elts) > 1 else None
        if shape is None:
            return
        values = self.fold(shape)
        if values is None or values is _OPAQUE:
            self.construct(node.lineno, "dynamic_code", "a jaxtyping shape the scan cannot read (it may be evaluated)")
            return
        for value in values:
            bad = _unsafe_dims(value) if isinstance(value, str) else None
            if bad is not None:
                self.construct(node.lineno, "dynamic_code", f"jaxtyping shape {bad!r}, which jaxtyping evaluates")

    # -- constant folding: a name built from string constants is that string -----------------------------------
    def fold(self, node: ast.AST | None, depth: int = 0):
        """The values ``node`` can have (a frozenset), ``_OPAQUE`` if built from constants in a way not computed
        here, None if it depends on something else (a parameter, a call's result)."""
        if node is None or depth > 12:
            return None
        if isinstance(node, ast.Constant):
            return frozenset([node.value]) if isinstance(node.value, (str, bytes, int)) else None
        if isinstance(node, ast.Name):
            values = self.bindings.get(node.id)
            if values is None or node.id in self.aliases or None in values or len(values) > _MAX_FOLD:
                return None
            return self.union([self.fold(v, depth + 1) for v in values])
        if isinstance(node, (ast.Tuple, ast.List)):
            return self.combine([self.fold(e, depth + 1) for e in node.elts], tuple)
        if isinstance(node, ast.JoinedStr):
            parts = []
            for v in node.values:
                if isinstance(v, ast.FormattedValue):
                    inner = self.fold(v.value, depth + 1)
                    if inner is None or inner is _OPAQUE or v.conversion not in (-1, 115) or v.format_spec:
                        return self.opaque_or_none(node)
                    parts.append(frozenset(str(x) for x in inner))
                else:
                    parts.append(self.fold(v, depth + 1))
            return self.combine(parts, lambda xs: "".join(xs))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            op = (lambda xs: xs[0] + xs[1]) if isinstance(node.op, ast.Add) else _times
            return self.combine([self.fold(node.left, depth + 1), self.fold(node.right, depth + 1)], op)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return self.combine([self.fold(node.operand, depth + 1)], lambda xs: -xs[0])
        if isinstance(node, ast.Subscript):
            index = node.slice
            if isinstance(index, ast.Slice):
                bounds = [self.fold(b, depth + 1) if b is not None else frozenset([None])
                          for b in (index.lower, index.upper, index.step)]
                return self.combine([self.fold(node.value, depth + 1), *bounds],
                                    lambda xs: xs[0][slice(xs[1], xs[2], xs[3])])
            return self.combine([self.fold(node.value, depth + 1), self.fold(index, depth + 1)],
                                lambda xs: xs[0][xs[1]])
        if isinstance(node, ast.Call) and not node.keywords:
            args = [self.fold(a, depth + 1) for a in node.args]
            if isinstance(node.func, ast.Attribute) and node.func.attr in _STR_METHODS:
                receiver = self.fold(node.func.value, depth + 1)
                method = node.func.attr
                return self.combine([receiver, *args], lambda xs: _str_method(xs[0], method, xs[1:]))
            if isinstance(node.func, ast.Name) and node.func.id in _FOLD_BUILTINS \
                    and node.func.id not in self.bindings:
                fn = {"chr": chr, "str": str, "bytes": bytes, "bytearray": bytes, "ord": ord, "int": int,
                      "reversed": lambda x: tuple(reversed(x)), "list": tuple, "tuple": tuple, "sorted": _sorted_tuple,
                      "hex": hex, "oct": oct, "bin": bin, "len": len}.get(node.func.id)
                if node.func.id == "map" and len(node.args) == 2 and isinstance(node.args[0], ast.Name) \
                        and node.args[0].id == "chr":
                    return self.combine([args[1]], lambda xs: tuple(chr(c) for c in xs[0]))
                if fn is not None:
                    return self.combine(args, lambda xs: fn(*_small(xs)))
        return self.opaque_or_none(node)

    def opaque_or_none(self, node: ast.AST):
        """Built from constants and harmless builtins only: ``_OPAQUE``; anything else: None."""
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and not (n.id in _FOLD_BUILTINS and n.id not in self.bindings):
                values = self.bindings.get(n.id)
                if values is None or None in values or n.id in self.aliases:
                    return None
        return _OPAQUE

    @staticmethod
    def union(parts):
        out: set = set()
        for part in parts:
            if part is None:
                return None
            if part is _OPAQUE:
                return _OPAQUE
            out |= part
            if len(out) > _MAX_FOLD:
                return _OPAQUE
        return frozenset(out)

    @staticmethod
    def combine(parts, op):
        if any(p is None for p in parts):
            return None
        if any(p is _OPAQUE for p in parts):
            return _OPAQUE
        out = set()
        for combo in itertools.islice(itertools.product(*parts), _MAX_FOLD + 1):
            if any(isinstance(x, (str, bytes, tuple)) and len(x) > _MAX_TEXT for x in combo):
                return _OPAQUE
            try:
                value = op(list(combo))
            except Exception:  # noqa: BLE001 - a type error, an index out of range: not computed here
                return _OPAQUE
            if isinstance(value, (str, bytes, tuple)) and len(value) > _MAX_TEXT:
                return _OPAQUE
            try:
                out.add(value)
            except TypeError:
                return _OPAQUE
        return frozenset(out) if len(out) <= _MAX_FOLD else _OPAQUE

    # -- the walk ------------------------------------------------------------------------------------------------
    def nodes(self, roots: list[ast.AST]) -> list[ast.AST]:
        """Every node under ``roots``, parents first, with ``self.parents`` filled in: one walk for every pass."""
        out = list(roots)
        i = 0
        while i < len(out):
            node = out[i]
            i += 1
            for child in child_nodes(node):
                self.parents[id(child)] = node
                out.append(child)
        return out

    def run(self) -> _Facts:
        nodes = self.nodes([self.tree])
        for node in nodes:
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    self.aliases[bound] = a.name if a.asname else a.name.split(".")[0]
                    self.imports.append((node.lineno, bound, a.name))
                    if a.name.split(".")[-1] == "__main__":
                        self.construct(node.lineno, "dynamic_code", a.name)  # importing it runs a program
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                if (node.module or "").split(".")[-1] == "__main__":
                    self.construct(node.lineno, "dynamic_code", module)
                for a in node.names:
                    if a.name == "*":
                        self.stars.append((node.lineno, module))
                        continue
                    bound = a.asname or a.name
                    self.aliases[bound] = f"{module}.{a.name}"
                    self.imports.append((node.lineno, bound, f"{module}.{a.name}"))
        self.annotation_strings(nodes)
        nodes += self.nodes(self.extra)
        self.collect_bindings(nodes)
        self.module_aliases()
        inner, called = set(), set()
        for node in nodes:
            if isinstance(node, ast.Attribute):
                inner.add(id(node.value))
            elif isinstance(node, ast.Call):
                called.add(id(node.func))
                self.probe(node)
            elif isinstance(node, ast.ClassDef):
                node._resolved_bases = tuple(self.base_name(b) for b in node.bases)  # read by self_bases
                for stmt in node.body:
                    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.defined_attrs.add(stmt.name)
                    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        self.defined_attrs.update(n.id for t in targets for n in ast.walk(t)
                                                  if isinstance(n, ast.Name))
        for node in nodes:
            self.visit(node, inner, called)
        statements = []
        for node in nodes:
            if isinstance(node, ast.Import):
                statements.append((0, "", tuple(a.name for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                statements.append((node.level or 0, node.module or "", tuple(a.name for a in node.names)))
        statements.extend((0, "", (module,)) for module in self.followed)
        return _Facts(self.lines, tuple(self.imports), tuple(statements), tuple(self.stars), tuple(sorted(self.names)),
                      tuple(sorted(self.bare)), tuple(sorted(self.attrs, key=lambda a: (a[0], a[1], str(a[2])))),
                      tuple(sorted(self.constructs)), frozenset(self.used), frozenset(self.defined_attrs))

    def base_name(self, base: ast.AST) -> str:
        dotted = dotted_name(base)
        return (self.resolve(dotted) if dotted else None) or ""

    def module_aliases(self) -> None:
        """``F = torch.nn.functional`` (the name's only binding): F stands for the module, as an import would."""
        for _ in range(3):
            for name, values in self.bindings.items():
                if name in self.aliases or len(values) != 1 or values[0] is None:
                    continue
                dotted = dotted_name(values[0])
                resolved = self.resolve(dotted) if dotted else None
                if resolved is not None and resolved not in _BUILTINS:
                    self.aliases[name] = resolved
                    self.alias_values.add(id(values[0]))

    def self_bases(self, node: ast.AST) -> tuple[str, ...] | None:
        """The resolved bases of the class whose ``self`` (``cls``, ``super()``) ``node`` is; None otherwise."""
        selfish = (isinstance(node, ast.Name) and node.id in _SELF) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super")
        if not selfish:
            return None
        cls = self.parents.get(id(node))
        while cls is not None and not isinstance(cls, ast.ClassDef):
            cls = self.parents.get(id(cls))
        return getattr(cls, "_resolved_bases", ()) if cls is not None else None

    def value_use(self, node: ast.AST, called: set[int]) -> bool:
        """Whether ``node`` (a whole dotted name) is used as a value, not called, tested or aliased."""
        if id(node) in called or id(node) in self.alias_values:
            return False
        parent = self.parents.get(id(node))
        if isinstance(parent, ast.Call) and parent.args and parent.args[0] is node \
                and dotted_name(parent.func) in ("getattr", "setattr", "delattr", "hasattr", "vars"):
            return False  # the lookup itself is judged
        if isinstance(parent, (ast.If, ast.While, ast.IfExp)) and parent.test is node:
            return False
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return False
        if isinstance(parent, ast.Compare) and all(isinstance(op, (ast.Is, ast.IsNot)) for op in parent.ops):
            return False
        return not isinstance(getattr(node, "ctx", None), ast.Del)

    def visit(self, node: ast.AST, inner: set[int], called: set[int]) -> None:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            self.used.add(node.id)
            if node.id in _ATTR_BUILTINS and node.id not in self.bindings and id(node) not in called:
                self.construct(node.lineno, "computed_getattr", f"{node.id} passed around")
        if isinstance(node, ast.Attribute):
            self.attribute(node, inner)
        if isinstance(node, (ast.Attribute, ast.Name)) and not isinstance(node.ctx, ast.Store):
            dotted = dotted_name(node)
            name = self.resolve(dotted) if dotted else None
            whole = id(node) not in inner
            if name is not None and id(node) in self.probes:
                pass  # find_spec("name") is None: a probe whose answer is one bool (what it imports is followed)
            elif name is not None:
                value = whole and self.value_use(node, called)
                self.names.add((node.lineno, name, whole, value))
                if whole and id(node) not in called and name in _RESOURCE_READERS:
                    self.construct(node.lineno, "dynamic_code", name)  # passed around: what it imports is unknown
            elif isinstance(node, ast.Name) and node.id not in self.bindings and node.id not in _PY_BUILTINS:
                self.bare.add((node.lineno, node.id, whole and self.value_use(node, called)))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and node.name in ("__torch_dispatch__", "__torch_function__"):
            self.construct(node.lineno, "torch_internals", node.name)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Subscript):
            head = dotted_name(node.value)
            resolved = self.resolve(head) if head else None
            if resolved and resolved.startswith("jaxtyping."):
                self.jaxtyping_shape(node)
            if isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__" \
                    or isinstance(node.value, ast.Call) and dotted_name(node.value.func) == "vars":
                self.dict_lookup(node.lineno, node.value, node.slice)

    def attribute(self, node: ast.Attribute, inner: set[int]) -> None:
        line = node.lineno
        if node.attr in _DUNDERS:
            self.construct(line, _DUNDERS[node.attr], f".{node.attr}")
        if node.attr == "__getattr__" and self.self_bases(node.value) is None:
            self.construct(line, "computed_getattr", ".__getattr__")
        if node.attr == "__dict__":
            self.dict_target(line, node.value)
        dotted = dotted_name(node)
        if dotted is None or self.resolve(dotted) is None:
            bases = self.self_bases(node.value)
            self.attrs.add((line, node.attr, bases))
            if bases is not None and isinstance(node.ctx, ast.Store):
                self.defined_attrs.add(node.attr)

    def dict_target(self, line: int, target: ast.AST) -> None:
        """``X.__dict__`` / ``vars(X)``: a module's or a class's names by key. An instance's own dict is data."""
        dotted = dotted_name(target)
        if dotted is not None and self.resolve(dotted) is not None:
            self.construct(line, "computed_getattr", f"{dotted}.__dict__")
        elif isinstance(target, ast.Call) and dotted_name(target.func) == "type" \
                or isinstance(target, ast.Attribute) and target.attr in _CLASS_WALKS \
                or isinstance(target, ast.Subscript):
            self.construct(line, "computed_getattr", "a class's __dict__")

    def dict_lookup(self, line: int, mapping: ast.AST, key: ast.AST) -> None:
        values = self.fold(key)
        if values is _OPAQUE:
            self.construct(line, "computed_getattr", "a __dict__ key built from constants")
        elif values:
            for value in values:
                if isinstance(value, str):
                    self.attrs.add((line, value, None))

    def call(self, node: ast.Call) -> None:
        func = dotted_name(node.func)
        resolved = self.resolve(func) if func else None
        line = node.lineno
        if resolved in _RESOURCE_READERS:
            self.resource_read(node)
            return
        builtin = func if func in _ATTR_BUILTINS | {"hasattr"} and func not in self.bindings else None
        if builtin in ("getattr", "setattr", "delattr", "hasattr") and node.args:
            self.lookup(line, builtin, node.args[0], node.args[1] if len(node.args) > 1 else None)
        elif builtin == "vars":
            if node.args:
                self.dict_target(line, node.args[0])
            else:
                self.construct(line, "computed_getattr", "vars()")
        elif builtin in ("globals", "locals"):
            self.construct(line, "computed_getattr", f"{builtin}()")
        elif resolved in ("operator.attrgetter", "operator.methodcaller"):
            keys = node.args if resolved == "operator.attrgetter" else node.args[:1]
            for key in keys:
                values = self.fold(key)
                if values is _OPAQUE:
                    self.construct(line, "computed_getattr", resolved)
                for value in values if isinstance(values, frozenset) else ():
                    for part in str(value).split(".") if resolved == "operator.attrgetter" else [str(value)]:
                        self.attrs.add((line, part, None))

    def lookup(self, line: int, how: str, target: ast.AST, key: ast.AST | None) -> None:
        """getattr and its kin: a literal name on a module is that name; a name the scan cannot read, on a module
        (or on an object, when it is built from constants), is a finding; a name that folds is judged as written."""
        dotted = dotted_name(target)
        resolved = self.resolve(dotted) if dotted else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            if resolved is not None:
                self.names.add((line, f"{resolved}.{key.value}", True, False))
            else:
                self.attrs.add((line, key.value, self.self_bases(target)))
            return
        values = self.fold(key)
        if resolved is not None:
            if how != "hasattr" or values is None or values is _OPAQUE:
                self.construct(line, "computed_getattr", f"{how}({dotted}, ...)")
            for value in values if isinstance(values, frozenset) else ():
                self.names.add((line, f"{resolved}.{value}", True, False))
            return
        if values is _OPAQUE and how != "hasattr":
            self.construct(line, "computed_getattr", f"{how} with a name built from constants")
        for value in values if isinstance(values, frozenset) else ():
            if isinstance(value, str):
                self.attrs.add((line, value, self.self_bases(target)))

    def probe(self, node: ast.Call) -> None:
        """``importlib.util.find_spec("name") is not None`` (CS336 repositories switch to a compiled backend so): no
        dynamic code where the spec is only compared with None and the name is a literal. A dotted name imports
        its parent packages, which are followed like an import; the module itself is only found, never run."""
        func = dotted_name(node.func)
        if func is None or self.resolve(func) != "importlib.util.find_spec" or node.keywords or len(node.args) != 1:
            return
        name = node.args[0]
        parent = self.parents.get(id(node))
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value
                and isinstance(parent, ast.Compare) and len(parent.ops) == 1
                and isinstance(parent.ops[0], (ast.Is, ast.IsNot))
                and any(isinstance(side, ast.Constant) and side.value is None
                        for side in (parent.left, *parent.comparators))):
            return
        self.probes.add(id(node.func))
        if "." in name.value:
            self.followed.append(name.value.rpartition(".")[0])

    def resource_read(self, node: ast.Call) -> None:
        """``importlib.resources.files(anchor)`` imports ``anchor`` when it names a module: follow a literal name
        like an import; the module's own name imports nothing; any other name is dynamic code."""
        keywords = {k.arg: k.value for k in node.keywords if k.arg in ("anchor", "package")}
        anchor = node.args[0] if node.args else next(iter(keywords.values()), None)
        if anchor is None or dotted_name(anchor) in _OWN_MODULE or dotted_name(anchor) == "__spec__.parent":
            return
        if isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
            self.followed.append(anchor.value)
        else:
            self.construct(node.lineno, "dynamic_code", "importlib.resources with a computed package")


def _sorted_tuple(x):
    return tuple(sorted(x))


def _small(args: list) -> list:
    """Arguments safe to compute with: no integer that would size a string or bytes beyond _MAX_TEXT."""
    if any(isinstance(a, int) and not 0 <= a <= 0x10FFFF for a in args) \
            or any(isinstance(a, int) and a > _MAX_TEXT for a in args[1:]):
        raise ValueError("too large to compute here")
    return args


def _times(xs: list):
    a, b = xs
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    count = b if isinstance(b, int) else a
    text = a if isinstance(b, int) else b
    if not isinstance(count, int) or len(text) * max(count, 0) > _MAX_TEXT:
        raise ValueError("too large to compute here")
    return text * count


def _str_method(receiver, method: str, args: list):
    if not isinstance(receiver, (str, bytes)) or any(isinstance(a, int) and abs(a) > _MAX_TEXT for a in args):
        raise ValueError("not computed here")
    return getattr(receiver, method)(*args)


def _unsafe_dims(shape: str) -> str | None:
    """The first dimension of a jaxtyping shape string that jaxtyping would evaluate as more than arithmetic."""
    for token in shape.split():
        if token == "...":
            continue
        elem = token
        while elem and elem[0] in "#*_?":
            elem = elem[1:]
        if elem.count("=") == 1:
            elem = elem.split("=")[1]
        if not elem or elem.isidentifier() or elem.isdigit():
            continue
        if any(c in elem for c in "{}'\"\\") or "__" in elem:
            return token
        try:
            expr = ast.parse(elem, mode="eval")
        except (SyntaxError, ValueError):
            continue  # eval, jaxtyping's, cannot parse it either: a name like "3_heads_d_k" runs nothing
        except (RecursionError, MemoryError):
            return token
        for n in ast.walk(expr):
            if isinstance(n, ast.Call):
                if not (isinstance(n.func, ast.Name) and n.func.id in _DIM_CALLS and not n.keywords):
                    return token
            elif isinstance(n, ast.Constant):
                if not isinstance(n.value, (int, float)):
                    return token
            elif not isinstance(n, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load, ast.operator,
                                    ast.unaryop)):
                return token
    return None


@functools.lru_cache(maxsize=256)  # a package's files (CS336: 20-70), judged again for each challenge
def _collect(file: str, source: str) -> _Facts:
    """Pass one over a file (SyntaxError if it does not parse): plain data, kept for every challenge's judgement."""
    return _Collector(file, source).run()


# -- pass two: the judgement, for one challenge ------------------------------------------------------------------
def _own(name: str, own: frozenset[str]) -> bool:
    return name.startswith(".") or name.split(".")[0] in own


def _judge(facts: _Facts, file: str, banned: tuple[str, ...], allow: frozenset[str], policy: Allowlist,
           own: frozenset[str], own_attrs: frozenset[str]) -> list[Finding]:
    found: dict[tuple[int, str], Finding] = {}
    check_allowlist = "not_allowed" not in allow

    def code(line: int) -> str:
        return facts.lines[line - 1].strip()[:160] if 0 < line <= len(facts.lines) else ""

    def add(line: int, what: str, construct: bool, unused: bool = False, name: str = "", indirect: bool = False,
            like: str = ""):
        key = (line, what)
        if key not in found:
            found[key] = Finding(file, line, what, code(line), construct, unused, name=name, indirect=indirect,
                                 like=like)

    def allowed_construct(name: str, canon: str) -> bool:
        """A construct the challenge allows (integrity.allow: [threads]) allows its modules too."""
        return any(_covers(p, name) or _covers(p, canon) for c in allow for p in CONSTRUCTS.get(c, ()))

    verdicts: dict[tuple[str, bool, bool], list[tuple]] = {}

    def judge_name(line: int, name: str, whole: bool, value: bool) -> None:
        """Judged once per file for each (name, whole, value), which is all the judgement depends on besides
        the challenge; each line it is used on gets the findings (a file uses ``torch.zeros`` many times)."""
        key = (name, whole, value)
        found_here = verdicts.get(key)
        if found_here is None:
            found_here = verdicts[key] = []
            judge(found_here, name, whole, value)
        for what, construct, kwargs in found_here:
            add(line, what, construct, **kwargs)

    def judge(out: list, name: str, whole: bool, value: bool) -> None:
        def note(what: str, construct: bool, **kwargs) -> None:
            out.append((what, construct, kwargs))

        api = _matches_api(name, banned)
        if api:
            note(api, False)
        if not whole or _own(name, own):
            return
        named = _walk(name, may_import=name.split(".")[0] in policy.roots)
        if not api and named.canon != name:  # a re-export: F.torch.embedding is torch.embedding
            api = _matches_api(named.canon, banned)
            if api:
                note(api, False, name=name, indirect=True)
        if not api and named.obj is not _UNKNOWN:  # another name of the same object
            hit = _banned_objects(banned).get(id(named.obj))
            if hit is not None and hit[1] is named.obj:
                api = hit[0]
                note(api, False, name=name, indirect=True)
        construct = _construct_of(name, allow) or _construct_of(named.canon, allow)
        if construct:
            note(construct, True, name=name)
        if not api:
            similar = _banned_name(named.canon.rsplit(".", 1)[-1], banned) if "." in named.canon else None
            if similar:
                note(named.canon, False, name=name, indirect=True, like=similar)
        if check_allowlist and not construct and not allowed_construct(name, named.canon) \
                and not allows(policy, name, named):
            note("not_allowed", True, name=name)
        elif value and named.is_module and "module_value" not in allow and not construct:
            note("module_value", True, name=name)

    for line, name, whole, value in facts.names:
        judge_name(line, name, whole, value)
    for line, attr, bases in facts.attrs:
        api = _banned_name(attr, banned)
        if api is None:
            continue
        if bases is None and attr not in own_attrs or bases is not None and _tensor_class(bases):
            add(line, f"torch.Tensor.{attr}" if _tensor_method(attr) else api, False, name=f".{attr}", indirect=True,
                like=api)
    for line, what, name in facts.constructs:
        if what not in allow:
            add(line, what, True, name=name)
    stars: list[tuple[str, types.ModuleType]] = []
    for line, module in facts.stars:
        api = _matches_api(f"{module}.*", banned) or _matches_api(module, banned)
        if api:
            add(line, api, False)
        if _own(module, own):
            continue
        construct = _construct_of(module, allow)
        if construct:
            add(line, construct, True, name=f"{module}.*")
        elif check_allowlist and not allowed_construct(module, module) and not allows(policy, module):
            add(line, "not_allowed", True, name=f"{module}.*")
        else:
            named = _walk(module, may_import=module.split(".")[0] in policy.roots)
            if isinstance(named.obj, types.ModuleType):
                stars.append((module, named.obj))
    for line, name, value in facts.bare:
        for module, obj in stars:
            public = getattr(obj, "__all__", None) or [n for n in vars(obj) if not n.startswith("_")]
            if name in public:
                judge_name(line, f"{module}.{name}", True, value)
                break
    used_lines = {(f.line, f.what) for f in found.values()}
    for line, bound, dotted in facts.imports:
        if bound in facts.used:
            continue  # its uses are reported where they happen
        construct = None if dotted in _READ_MODULES else _construct_of(dotted, allow)
        for what, is_construct in ((_matches_api(dotted, banned), False), (construct, True)):
            if what and (line, what) not in used_lines:
                add(line, what, is_construct, unused=True)
    return sorted(found.values(), key=lambda f: (f.line, f.what))


@functools.lru_cache(maxsize=16)
def _scanned(file: str, source: str, banned: tuple[str, ...], allow: frozenset[str],
             policy: Allowlist = DEFAULT_POLICY, own: frozenset[str] = frozenset(),
             own_attrs: frozenset[str] | None = None
             ) -> tuple[tuple[Finding, ...], tuple[tuple[int, str, tuple[str, ...]], ...]]:
    """One file's findings and its import statements as (level, module, names) (``import a.b`` is
    ``(0, "", ("a.b",))``); SyntaxError if it does not parse.

    Every source check of every challenge scans the same files: each distinct file is parsed and walked once per
    process (:func:`_collect`, plain data, not the tree: a long-lived batch grader would hold megabytes per
    file), and judged once per challenge's bans and allowlist.
    """
    facts = _collect(file, source)
    attrs = facts.defined_attrs if own_attrs is None else own_attrs
    return tuple(_judge(facts, file, banned, allow, policy, own, attrs)), facts.statements


def scan_source(source: str, banned: list[str], allow: set[str] | frozenset = frozenset(),
                file: str = "layers.py", allowed: Allowlist | None = None,
                own: frozenset[str] = frozenset()) -> list[Finding]:
    """Findings in one decoded source; raises SyntaxError if it does not parse."""
    return list(_scanned(file, source, tuple(banned), frozenset(allow), allowed or DEFAULT_POLICY, own)[0])


def _imported_when_run(text: str) -> set[str]:
    """The modules a file's imports name outside any function body (they run when the file is imported), as written
    (``a.b``, ``.h``, ``.h.f``): read only for a file that imports one the scan cannot parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    out: set[str] = set()
    pending: list[tuple[ast.AST, bool]] = [(tree, False)]
    while pending:
        node, in_function = pending.pop()
        for child in ast.iter_child_nodes(node):
            lazy = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if not lazy and isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif not lazy and isinstance(child, ast.ImportFrom):
                base = "." * (child.level or 0) + (child.module or "")
                out.add(base)
                joint = "." if child.module else ""  # from . import h: ".h"; from .a import h: ".a.h"
                out.update(f"{base}{joint}{a.name}" for a in child.names if a.name != "*")
            pending.append((child, lazy))
    return out


def _run_on_import(start: set[str], sources: list[Source], files_of: Callable[[Source, str], list[str]]) -> set[str]:
    """The files (as :class:`Source` names them) that importing ``start`` runs: followed through each file's imports
    outside function bodies; ``files_of(source, name)`` says which files an import of ``name`` in ``source`` runs."""
    runs, texts_of = set(start), {src.file: src for src in sources}
    pending = [f for f in runs if f in texts_of]
    while pending:
        src = texts_of.pop(pending.pop())
        for name in _imported_when_run(src.text):
            for file in files_of(src, name):
                if file not in runs:
                    runs.add(file)
                    if file in texts_of:
                        pending.append(file)
    return runs


def _unparsed(rel: str, exc: SyntaxError) -> Unreadable:
    return Unreadable(f"{rel} does not parse: line {exc.lineno}: {exc.msg}")


def _imported_modules(statements) -> list[str]:
    """Every module an import statement may name, relative ones with their dots: ``import a.b`` is
    ``a.b``; ``from .h import f`` is ``.h`` and ``.h.f`` (``f`` may be a module of package ``h``)."""
    out: list[str] = []
    for level, module, names in statements:
        if not level and not module:  # import a.b, c
            out.extend(names)
            continue
        base = "." * level + module
        out.append(base)
        out.extend(f"{base}.{name}" for name in names if name != "*")
    return out


def _judge_reach(findings: list[Finding], sources: list[Source], roots: list[tuple[str, str]] | None
                 ) -> list[Finding]:
    """Mark a finding outside the code the ``roots`` may run as not reachable (advice only).

    That holds for constructs too (a tokenizer's ``pickle.loads``, a data loader's worker ``Pool`` in a module the
    adapters import): the analysis over-approximates what can run (module-level code, everything a reachable line
    names, everything a dynamic lookup could reach), so code it leaves out is code nothing names; and what really
    runs is watched at run time (threads, the dispatch-mode stack, the profiler), wherever it was written.
    """
    if roots is None:
        return findings
    lines = reachable_lines(sources, roots)
    if lines is None:
        return findings
    judged = [f if f.line in lines.get(f.file, ()) else dataclasses.replace(f, reachable=False) for f in findings]
    if not any(f.reachable and f.what in _SOLUTION_ONLY for f in judged):
        return judged
    called = reachable_lines(sources, roots, effects=False)
    if called is None:
        return judged
    return [dataclasses.replace(f, reachable=False)
            if f.reachable and f.what in _SOLUTION_ONLY and f.line not in called.get(f.file, ()) else f
            for f in judged]


# What a solution may use, not what may tamper: judged in the code the layer's own calls name. What importing a
# module runs besides (a tokenizer module's loguru set-up, a device helper that hands torch.cuda around, in
# modules the adapters import for other tests) is advice there; constructs stay judged wherever they run.
_SOLUTION_ONLY = frozenset({"not_allowed", "module_value"})


def _own_names(names, policy: Allowlist, banned: tuple[str, ...]) -> frozenset[str]:
    """The submission's own top-level modules, less those the worker would take from elsewhere (the standard
    library, the allowlist's and the bans' packages, loaded before the student's files): those are judged as
    what they would be there."""
    taken = set(sys.stdlib_module_names) | set(sys.builtin_module_names) | policy.roots
    taken |= {api.split(".")[0] for api in banned} | {"torch", "validator"}
    return frozenset(n for n in names if n and n not in taken)


def _defined_attrs(texts: dict[str, str]) -> frozenset[str]:
    """Attributes the submission's own classes define, in any of its files (``self.embedding = ...``, a method
    ``softmax``): ``model.embedding`` in an adapter is the student's, not a library's, name."""
    return _attrs_of(tuple(texts.items()))


@functools.lru_cache(maxsize=32)  # every source check of every challenge asks it of the same files
def _attrs_of(texts: tuple[tuple[str, str], ...]) -> frozenset[str]:
    out: set[str] = set()
    for file, text in texts:
        try:
            out |= _collect(file, text).defined_attrs
        except SyntaxError:
            continue
    return frozenset(out)


def _unreached(findings: list[Finding]) -> list[Finding]:
    """A file no import names runs only through a dynamic load, which is itself a finding: advice."""
    return [dataclasses.replace(f, reachable=False) for f in findings]


def scan_submission(student_file: str | Path, banned: list[str], allow: set[str] | frozenset = frozenset(),
                    entries: list[str] | None = None, allowed: Allowlist | None = None) -> list[Finding]:
    """Scan ``layers.py``, every helper module beside it that it (transitively) imports, and every other Python
    file beside it (the worker gets a copy of each).

    With ``entries`` (names defined in ``layers.py``), a finding outside the code they may run is marked
    ``reachable=False``; a finding in a file no import names always is.
    """
    student_file = Path(student_file)
    folder = student_file.parent
    policy = allowed or DEFAULT_POLICY
    siblings = sorted(p for p in folder.glob("*.py") if p.name != student_file.name)
    packages = [p.name for p in folder.iterdir() if (p / "__init__.py").is_file()] if folder.is_dir() else []
    own = _own_names([student_file.stem, *(p.stem for p in siblings), *packages], policy, tuple(banned))
    texts: dict[str, str] = {}
    for path in [student_file, *[p for p in siblings if not p.is_symlink()][:MAX_HELPERS]]:
        try:
            texts[path.name] = decode_source(path.name, read_bytes(path))[0]
        except Unreadable:
            continue
    attrs = _defined_attrs(texts)
    # what an import of a top-level name may load from the folder, `name.py` or `name/__init__.py`: listed once
    # here, not looked up for every import of every file (two stat calls each, for each challenge's scan)
    modules_beside = {p.stem: p for p in siblings if p.exists()}
    packages_beside = {p.name: p / "__init__.py" for p in folder.iterdir()
                       if (p / "__init__.py").exists()} if folder.is_dir() else {}
    queue, seen, findings = [student_file], set(), []
    sources: list[Source] = []
    unparsed: list[tuple[Path, SyntaxError]] = []
    while queue and len(seen) < MAX_FILES:
        path = queue.pop(0)
        if path.name in seen:
            continue
        seen.add(path.name)
        text, cookie = decode_source(path.name, read_bytes(path))  # one the scan cannot read is never left out
        try:
            found, statements = _scanned(path.name, text, tuple(banned), frozenset(allow), policy, own, attrs)
        except SyntaxError as exc:
            if path == student_file:
                raise _unparsed(path.name, exc) from None
            unparsed.append((path, exc))  # judged below, once every file that may import it is read
            continue
        findings.extend(f for f in cookie if f.what not in allow)
        findings.extend(found)
        package = path.name == "__init__.py"
        sources.append(Source(path.parent.name if package else path.stem, path.name, text, package))
        for module in _imported_modules(statements):
            top = module.lstrip(".").split(".")[0]
            for candidate in (modules_beside.get(top), packages_beside.get(top)):
                if top and candidate is not None and candidate.name != student_file.name and candidate != path:
                    queue.append(candidate)
                    break
    if unparsed:  # the files importing the student's file runs (see scan_package)
        by_name = {**{stem: p.name for stem, p in modules_beside.items()},
                   **{package: p.name for package, p in packages_beside.items()}}
        runs = _run_on_import({student_file.name}, sources,
                              lambda _, name: [f] if (f := by_name.get(name.lstrip(".").split(".")[0])) else [])
        for path, exc in unparsed:
            if path.name in runs:
                raise _unparsed(path.name, exc) from None
    roots = None if entries is None else [(student_file.stem, name) for name in entries]
    findings = _judge_reach(findings, sources, roots)
    for path in [p for p in siblings if not p.is_symlink()][:MAX_HELPERS]:
        if path.name in seen:
            continue
        try:
            text, cookie = decode_source(path.name, read_bytes(path))
            found, _ = _scanned(path.name, text, tuple(banned), frozenset(allow), policy, own, attrs)
        except (Unreadable, SyntaxError):
            continue  # the intake refuses it, or the worker cannot import it either
        findings.extend(_unreached([*(f for f in cookie if f.what not in allow), *found]))
    return findings


MAX_PACKAGE_SCAN = 200


def scan_package(files: dict[str, bytes], modules: list[str], banned: list[str],
                 allow: set[str] | frozenset = frozenset(), entries: list[tuple[str, str]] | None = None,
                 allowed: Allowlist | None = None) -> list[Finding]:
    """Scan what importing ``modules`` from a student's package runs, every module of it they import, and every
    other Python file of the package (the worker gets a copy of each).

    ``files`` maps each Python file of the package (relative posix path) to the bytes the
    intake read, which are the bytes the worker imports. Importing ``a.b.c`` runs
    ``a/__init__.py`` and ``a/b/__init__.py`` first, so those are scanned too; imports
    (absolute, or relative to the importing module's package) of modules that are files of
    the package are followed. Findings name files by their path in the package. With ``entries``
    (``(module, name)`` pairs), a finding outside the code they may run is marked ``reachable=False``;
    a finding in a file no import names always is.

    A file that does not parse raises :class:`Unreadable` if a graded module, a package ``__init__`` that importing
    one runs, or an import outside a function of any file scanned names it. A file only functions import is left
    out: the worker compiles the same bytes with the same Python, so it runs nowhere (a call that imports it fails,
    naming the error), and a function the layer never calls (a tokenizer's trainer, under syntax newer than this
    Python) costs nothing. A file the scan cannot read or decode (too large, a link, a bad encoding) is never left
    out: the worker might read it otherwise.
    """
    policy = allowed or DEFAULT_POLICY
    own = _own_names({rel.split("/")[0].removesuffix(".py") for rel in files}, policy, tuple(banned))
    texts: dict[str, str] = {}
    for rel in sorted(files)[:MAX_PACKAGE_SCAN]:
        try:
            texts[rel] = decode_source(rel, files[rel])[0]
        except Unreadable:
            continue
    attrs = _defined_attrs(texts)

    def module_file(module: str) -> str | None:
        base = module.replace(".", "/")
        return next((rel for rel in (f"{base}.py", f"{base}/__init__.py") if rel in files), None)

    def chain(module: str) -> list[str]:
        parts = module.split(".")
        return [rel for i in range(1, len(parts) + 1) if (rel := module_file(".".join(parts[:i])))]

    def absolute(name: str, package: str) -> str:
        """``name`` as an import statement in ``package`` writes it (``.h``), made absolute."""
        level = len(name) - len(name.lstrip("."))
        if not level:
            return name
        parts = package.split(".") if package else []
        return ".".join(parts[:max(0, len(parts) - (level - 1))] + ([name[level:]] if name[level:] else []))

    def run_by(name: str) -> list[str]:
        """The files an import of the absolute ``name`` runs: its longest prefix that is a module, with its packages."""
        parts = name.split(".")
        return next((chain(m) for i in range(len(parts), 0, -1) if module_file(m := ".".join(parts[:i]))), [])

    queue = [rel for m in modules for rel in chain(m)]
    graded = set(queue)  # the files importing the graded modules runs: one that does not parse cannot be checked
    seen: set[str] = set()
    findings: list[Finding] = []
    sources: list[Source] = []
    unparsed: list[tuple[str, SyntaxError]] = []
    while queue and len(seen) < MAX_PACKAGE_SCAN:
        rel = queue.pop(0)
        if rel in seen:
            continue
        seen.add(rel)
        text, cookie = decode_source(rel, files[rel])  # one the scan cannot decode is never left out
        try:
            found, statements = _scanned(rel, text, tuple(banned), frozenset(allow), policy, own, attrs)
        except SyntaxError as exc:
            if rel in graded:
                raise _unparsed(rel, exc) from None
            unparsed.append((rel, exc))  # judged below, once every file that may import it is read
            continue
        findings.extend(f for f in cookie if f.what not in allow)
        findings.extend(found)
        dotted = rel[:-3].replace("/", ".")
        package = dotted.removesuffix(".__init__") if rel.endswith("/__init__.py") else dotted.rpartition(".")[0]
        sources.append(Source(package if rel.endswith("/__init__.py") else dotted, rel, text,
                              rel.endswith("/__init__.py")))
        for level, module, imported in statements:
            if not module and not level:  # import a.b, c
                names = list(imported)
            else:
                base = module
                if level:
                    parts = package.split(".") if package else []
                    keep = parts[:max(0, len(parts) - (level - 1))]
                    base = ".".join(keep + ([base] if base else []))
                names = [base] + [f"{base}.{a}" for a in imported if a != "*"]
            for name in names:
                parts = name.split(".")
                for i in range(len(parts), 0, -1):  # the longest prefix that is a module of the package
                    if module_file(".".join(parts[:i])):
                        queue.extend(chain(".".join(parts[:i])))
                        break
    if unparsed:  # the files importing the graded modules runs (see above)
        runs = _run_on_import(graded, sources, lambda src, name: run_by(absolute(
            name, src.module if src.is_package else src.module.rpartition(".")[0])))
        for rel, exc in unparsed:
            if rel in runs:
                raise _unparsed(rel, exc) from None
    findings = _judge_reach(findings, sources, entries)
    for rel in sorted(files)[:MAX_PACKAGE_SCAN]:
        if rel in seen or not rel.endswith(".py"):
            continue
        try:
            text, cookie = decode_source(rel, files[rel])
            found, _ = _scanned(rel, text, tuple(banned), frozenset(allow), policy, own, attrs)
        except (Unreadable, SyntaxError):
            continue  # the worker cannot import it either
        findings.extend(_unreached([*(f for f in cookie if f.what not in allow), *found]))
    return findings


def allowlist_lines(policy: Allowlist) -> list[str]:
    """The allowlist as a student reads it on the challenge page: one line per group of entries."""
    modules = [e for e in policy.allowed if e not in NOT_CONSTRUCTS + _RESOURCE_READERS]
    torch_entries = [e for e in modules if e.split(".")[0] == "torch"]
    others = [e for e in modules if e.split(".")[0] != "torch"]

    def show(entry: str) -> str:
        return f"`{entry[:-2]}` and its submodules" if entry.endswith(".*") else f"`{entry}`"

    lines = ["torch: " + ", ".join(show(e) for e in torch_entries)] if torch_entries else []
    if others:
        lines.append("other modules and names: " + ", ".join(show(e) for e in others))
    lines.append("reading your package's own version and data files (`importlib.metadata.version`, "
                 "`importlib.resources.files`)")
    if policy.excluded:
        lines.append("not allowed even so (they load or compile code): "
                     + ", ".join(f"`{e}`" for e in policy.excluded))
    return lines
