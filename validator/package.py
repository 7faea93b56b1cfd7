"""A student's own package, graded in place through a small mapping.

A course or a student keeps its own layout (``cs336_basics/model.py`` with
``class MyEmbedding``); a mapping says which class or function implements each
entry of a challenge's contract. It lives in the package's ``pyproject.toml``::

    [tool.validator.map]
    "token_embedding.Embedding" = "cs336_basics.model:MyEmbedding"
    "embedding_functional.embedding" = "cs336_basics.functional:lookup"

    [tool.validator.parameters."token_embedding.Embedding"]
    weight = "table"                      # contract name = the student's name

    [tool.validator]
    default = "cs336_basics.layers"       # optional: unmapped entries, under their contract names

or in a file passed with ``--map PATH`` holding the same tables (at its top level,
``[map]``/``[parameters]``, or under ``[tool.validator]``). Everything is checked
against the catalogue when it is read, and each problem names the file and the key
(:class:`MapError`). Unmapped entries are looked up under their contract names in
``default`` if given, else in a ``layers.py`` at the package root, else they are
reported as not mapped.

Every Python file under the package root (hidden folders, ``__pycache__`` and
virtual environments left out) is read with :func:`validator.intake.read_submission_file`
(no links, regular files, capped); those bytes, and only those, are what the worker
imports from a staged copy and what :mod:`validator.integrity` scans.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file

MAX_MAP_BYTES = 64 << 10
MAX_PACKAGE_FILES = 200
MAX_PACKAGE_BYTES = 16 << 20
SECTION = "[tool.validator]"
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_TARGET = re.compile(rf"^({_DOTTED}):([A-Za-z_][A-Za-z0-9_]*)$")
_MODULE = re.compile(rf"^{_DOTTED}$")
_KNOWN_KEYS = ("map", "parameters", "default")
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}


class MapError(Exception):
    """A mapping that cannot be used; ``problems`` are one sentence each, naming the file and key."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = list(problems)


@dataclass(frozen=True)
class Target:
    """Where one entry lives: ``module:attr`` inside the package, and the module's file."""

    module: str
    attr: str
    file: str  # the module's file, relative to the package root (posix), e.g. cs336_basics/model.py
    key: str = ""  # the mapping key that chose it ("" for a default lookup)
    # Reached through the repository's tests/adapters.py: how the worker calls it (validator.adapters.entry_data)
    adapter: dict | None = field(default=None, compare=False, hash=False)

    @property
    def label(self) -> str:
        return f"{self.module}:{self.attr}"


@dataclass
class StudentPackage:
    """A package root, its mapping and its Python files (read under the intake's rules)."""

    root: Path
    map_file: Path
    map_arg: str | None = None  # --map as given, for reproduce lines
    targets: dict[str, dict[str, Target]] = field(default_factory=dict)  # challenge -> entry -> target
    parameters: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # ch -> entry -> {contract: theirs}
    unmapped: dict[str, dict[str, str]] = field(default_factory=dict)  # challenge -> entry -> why
    notes: list[str] = field(default_factory=list)  # problems set aside by a lenient load (see load_package)
    files: dict[str, Path] = field(default_factory=dict)  # relative posix path -> file
    data: dict[str, bytes] = field(default_factory=dict)  # relative posix path -> the bytes read

    @property
    def map_name(self) -> str:
        return self.map_file.name if self.map_arg is None else str(self.map_arg)

    def mapped_challenges(self, order: list[str]) -> list[str]:
        """The challenges (in ``order``) with at least one entry found through the mapping or its defaults."""
        return [cid for cid in order if self.targets.get(cid)]

    def target(self, challenge: str, entry: str) -> Target | None:
        return self.targets.get(challenge, {}).get(entry)

    def worker_request(self, staged_root: str | os.PathLike) -> dict:
        """What the worker's load request carries (plain data): the staged root and ``challenge.Entry -> [module, attr]``.

        A sandboxed worker ignores the root and imports from its own scratch copy.
        """
        return {"root": str(staged_root),
                "targets": {f"{cid}.{name}": [t.module, t.attr] for cid, entries in self.targets.items()
                            for name, t in entries.items()},
                "adapters": {f"{cid}.{name}": t.adapter for cid, entries in self.targets.items()
                             for name, t in entries.items() if t.adapter is not None}}

    @property
    def adapted(self) -> list[str]:
        """The challenges graded through tests/adapters.py, in the package's target order."""
        return [cid for cid, entries in self.targets.items() if any(t.adapter for t in entries.values())]

    def sandbox_files(self) -> dict[str, str]:
        """Scratch name -> source file, for :class:`validator.sandbox.Sandbox` (re-read there with the same bounds)."""
        return {rel: str(path) for rel, path in self.files.items()}

    def stage(self, into: str | os.PathLike | None = None) -> Path:
        """Write the bytes that were read (and scanned) into a fresh folder; the worker imports from there."""
        folder = Path(into or tempfile.mkdtemp(prefix="validator-package-"))
        for rel, data in self.data.items():
            dest = folder / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return folder

    @contextmanager
    def staged_worker(self, root: str | os.PathLike) -> Iterator[Any]:
        """A (not yet started) worker for this package that imports a staged copy of the bytes read and
        scanned, never the live folder; the worker and the copy are gone on exit."""
        from validator.worker.client import Worker

        staged = self.stage()
        try:
            with Worker(root, package=self.worker_request(staged)) as worker:
                yield worker
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    def module_file(self, module: str) -> str | None:
        """The relative file that holds ``module`` (a .py file or a package's __init__.py)."""
        base = module.replace(".", "/")
        for rel in (f"{base}.py", f"{base}/__init__.py"):
            if rel in self.data:
                return rel
        return None

    def import_chain(self, module: str) -> list[str]:
        """The files Python runs to import ``module``: each parent package's __init__.py, then the module."""
        parts = module.split(".")
        files = []
        for i in range(1, len(parts) + 1):
            rel = self.module_file(".".join(parts[:i]))
            if rel is not None and rel not in files:
                files.append(rel)
        return files


def is_package_root(path: Path) -> bool:
    """A folder graded in place: its pyproject.toml has a [tool.validator] table, or it holds CS336's
    tests/adapters.py (:mod:`validator.adapters`)."""
    if not path.is_dir():
        return False
    return _has_adapters(path) or _has_mapping(path)


def _has_adapters(root: Path) -> bool:
    from validator.adapters import ADAPTERS_FILE

    adapters = root / ADAPTERS_FILE
    return adapters.is_file() and not adapters.is_symlink() and not adapters.parent.is_symlink()


def _has_mapping(path: Path) -> bool:
    pyproject = path / "pyproject.toml"
    if not pyproject.is_file() or pyproject.is_symlink():
        return False
    try:
        text = read_submission_file(pyproject, cap=MAX_MAP_BYTES).decode("utf-8", "replace")
    except IntakeError:
        return True  # let load_package say what is wrong with it
    return re.search(r"^\s*\[\s*tool\.validator[\].]", text, re.MULTILINE) is not None


def read_files(root: Path) -> tuple[dict[str, Path], dict[str, bytes], list[str]]:
    """Every Python file under ``root`` (links are not followed), read with the intake's bounds."""
    files: dict[str, Path] = {}
    data: dict[str, bytes] = {}
    problems: list[str] = []
    total = 0
    for folder, dirs, names in os.walk(root, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS
                         and not os.path.exists(os.path.join(folder, d, "pyvenv.cfg"))
                         and not os.path.islink(os.path.join(folder, d)))
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                continue  # never followed, never staged: importing it fails in the worker, with its name
            if len(files) >= MAX_PACKAGE_FILES:
                problems.append(f"the package holds more than {MAX_PACKAGE_FILES} Python files, the limit for a "
                                "submission: not graded (leave data, tests and environments out of its root)")
                return files, data, problems
            try:
                raw = read_submission_file(path, cap=MAX_SOURCE_BYTES, what=rel)
            except IntakeError as exc:
                problems.append(str(exc))
                continue
            total += len(raw)
            if total > MAX_PACKAGE_BYTES:
                problems.append(f"the package's Python files hold more than {MAX_PACKAGE_BYTES >> 20} MiB, the "
                                "limit for a submission: not graded")
                return files, data, problems
            files[rel] = path
            data[rel] = raw
    return files, data, problems


def _parse_toml(raw: bytes, where: str) -> dict[str, Any]:
    from validator.tomlcompat import tomllib

    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise MapError([f"{where} is not UTF-8 text"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise MapError([f"{where}: invalid TOML: {exc}"]) from None
    except RecursionError:
        raise MapError([f"{where}: nested too deeply"]) from None


def _section(doc: dict[str, Any], where: str, explicit: bool) -> tuple[dict[str, Any], str]:
    """The mapping's table and how to name it in messages."""
    tool = doc.get("tool")
    if isinstance(tool, dict) and "validator" in tool:
        section = tool["validator"]
        if not isinstance(section, dict):
            raise MapError([f"{where}: {SECTION} must be a table"])
        return section, "tool.validator."
    if explicit and any(k in doc for k in _KNOWN_KEYS):
        return doc, ""
    how = "[map] (or [tool.validator.map])" if explicit else "[tool.validator.map]"
    raise MapError([f"{where} has no {SECTION} table: add {how} with lines like "
                    '"token_embedding.Embedding" = "your_package.module:YourClass"'])


def top_level_names(source: bytes) -> set[str] | None:
    """Names a module binds at its top level (None when it cannot be told: a star import, a __getattr__)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the import will report it
    names: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.name == "*":
                    return None
                names.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            for part in ("body", "orelse", "finalbody", "handlers"):
                stack.extend(getattr(node, part, []) or [])
        elif isinstance(node, ast.ExceptHandler):
            stack.extend(node.body)
    return None if "__getattr__" in names else names


def load_package(root: str | os.PathLike, catalogue: dict, *, map_path: str | os.PathLike | None = None,
                 map_arg: str | None = None, strict: bool = True) -> StudentPackage:
    """Read and check a package root and its mapping against ``catalogue``; :class:`MapError` lists every problem.

    The mapping comes from ``map_path`` when given, else from ``ROOT/pyproject.toml``.
    ``strict=False`` (batch grading) raises only for what leaves nothing to grade (no folder, no
    mapping, invalid TOML, a file over the intake's bounds): a bad ``map`` line makes its own entry
    unmapped, with the problem as the reason its challenge's checks give, and every other problem
    becomes a note, so one typo costs one challenge rather than the whole submission.
    """
    root = Path(root)
    explicit = map_path is not None
    map_file = Path(map_path) if explicit else root / "pyproject.toml"
    where = str(map_arg) if map_arg else (str(map_file) if explicit else f"{root.name}/pyproject.toml")
    if not root.is_dir():
        raise MapError([f"{root} is not a folder (pass --student the root of your package)"])
    if explicit or _has_mapping(root) or not _has_adapters(root):
        try:
            raw = read_submission_file(map_file, cap=MAX_MAP_BYTES, what=where)
        except IntakeError as exc:
            hint = "" if explicit else (": a package is graded through CS336's tests/adapters.py or a "
                                        "[tool.validator.map] table in its pyproject.toml (or pass --map PATH), "
                                        "a plain folder needs a layers.py")
            raise MapError([f"{exc}{hint}"]) from None
        section, prefix = _section(_parse_toml(raw, where), where, explicit)
    else:  # graded through tests/adapters.py alone
        section, prefix = {}, "tool.validator."
    files, data, read_problems = read_files(root)
    pkg = StudentPackage(root=root, map_file=map_file, map_arg=map_arg, files=files, data=data)
    problems = list(read_problems)
    for key in section:
        if key not in _KNOWN_KEYS:
            problems.append(f"{where}: unknown key {prefix}{key}; the mapping has "
                            + ", ".join(f"{prefix}{k}" for k in _KNOWN_KEYS))
    table = section.get("map", {})
    if not isinstance(table, dict):
        problems.append(f"{where}: {prefix}map must be a table of \"challenge.Entry\" = \"module:attr\" lines")
        table = {}
    for key, value in table.items():
        found = _entry_of(key, catalogue, where, f"{prefix}map")
        if isinstance(found, str):
            problems.append(found)
            continue
        cid, name = found
        target = _target(pkg, value, where, f'{prefix}map."{key}"', key)
        if isinstance(target, str):
            if strict:
                problems.append(target)
            else:
                pkg.unmapped.setdefault(cid, {})[name] = target
            continue
        pkg.targets.setdefault(cid, {})[name] = target
    default = section.get("default")
    if default is not None:
        if not isinstance(default, str) or not _MODULE.match(default):
            problems.append(f"{where}: {prefix}default must be a dotted module name such as \"my_package.layers\", "
                            f"got {default!r}")
            default = None
        elif pkg.module_file(default) is None:
            problems.append(f"{where}: {prefix}default = {default!r}: no module {default} in the package "
                            f"(looked for {default.replace('.', '/')}.py and {default.replace('.', '/')}/__init__.py "
                            f"under {root})")
            default = None
    problems += _parameters(pkg, section.get("parameters", {}), catalogue, where, prefix)
    if problems and (strict or read_problems):  # a file over the intake's bounds is never graded around
        raise MapError(problems)
    pkg.notes.extend(f"{p} (set aside: the rest of the mapping is graded)" for p in problems)
    _add_adapters(pkg, catalogue)
    _fill_defaults(pkg, catalogue, default, where)
    return pkg


def _add_adapters(pkg: StudentPackage, catalogue: dict) -> None:
    """Entries an implemented function of tests/adapters.py reaches are graded through it (over a map line)."""
    from validator import adapters

    source = pkg.data.get(adapters.ADAPTERS_FILE)
    if source is None:
        return
    functions = adapters.adapter_functions(source)
    if functions is None:  # it does not parse: grade what it should reach, and let the import say why it fails
        functions = {a.function: adapters.AdapterFunction(a.function, 0, False) for ch in catalogue.values()
                     for e in ch.entries.values() for a in e.adapters}
    reached, stubbed = adapters.reach(functions, catalogue)
    replaced = []
    for cid, entries in reached.items():
        for name, variants in entries.items():
            if pkg.target(cid, name) is not None:
                replaced.append(f"{cid}.{name}")
            pkg.unmapped.get(cid, {}).pop(name, None)
            pkg.targets.setdefault(cid, {})[name] = Target(
                adapters.ADAPTERS_MODULE, variants[0].function, adapters.ADAPTERS_FILE, "adapter",
                adapter=adapters.entry_data(catalogue[cid], catalogue[cid].entries[name], variants))
    for cid, entries in stubbed.items():
        for name, why in entries.items():
            if pkg.target(cid, name) is None:
                pkg.unmapped.setdefault(cid, {})[name] = why
    if replaced:
        pkg.notes.append(f"graded through {adapters.ADAPTERS_FILE}, not the [tool.validator.map] lines for "
                         f"{', '.join(replaced)}: the course's adapters are how its own tests call your code")


def _entry_of(key: Any, catalogue: dict, where: str, table: str) -> tuple[str, str] | str:
    """``(challenge, entry)`` for a ``"challenge.Entry"`` key, or the sentence that says what is wrong."""
    cid, dot, name = str(key).partition(".")
    if not dot or not name:
        return (f"{where}: key {key!r} under [{table}] must be \"challenge.Entry\", "
                f"e.g. \"token_embedding.Embedding\"")
    if cid not in catalogue:
        return f"{where}: key {key!r} under [{table}]: unknown challenge {cid!r}; challenges: {', '.join(catalogue)}"
    entries = catalogue[cid].entries
    if name not in entries:
        return (f"{where}: key {key!r} under [{table}]: challenge {cid} has no entry {name!r}; "
                f"its entries: {', '.join(entries)}")
    return cid, name


def _target(pkg: StudentPackage, value: Any, where: str, key: str, map_key: str) -> Target | str:
    if not isinstance(value, str) or not _TARGET.match(value):
        return (f"{where}: {key} = {value!r} is not \"module:attr\" (a dotted module inside the package, a colon, "
                "a class or function name), e.g. \"cs336_basics.model:MyEmbedding\"")
    module, attr = value.split(":")
    rel = pkg.module_file(module)
    if rel is None:
        base = module.replace(".", "/")
        return (f"{where}: {key} = {value!r}: no module {module} in the package (looked for {base}.py and "
                f"{base}/__init__.py under {pkg.root})")
    names = top_level_names(pkg.data[rel])
    if names is not None and attr not in names:
        return f"{where}: {key} = {value!r}: {rel} defines no {attr!r} at its top level"
    return Target(module, attr, rel, map_key)


def _parameters(pkg: StudentPackage, table: Any, catalogue: dict, where: str, prefix: str) -> list[str]:
    problems = []
    if not isinstance(table, dict):
        return [f"{where}: {prefix}parameters must hold one table per \"challenge.Entry\""]
    for key, names in table.items():
        found = _entry_of(key, catalogue, where, f"{prefix}parameters")
        if isinstance(found, str):
            problems.append(found)
            continue
        cid, entry_name = found
        entry = catalogue[cid].entries[entry_name]
        label = f'{prefix}parameters."{key}"'
        if not isinstance(names, dict) or not all(isinstance(v, str) and v for v in names.values()):
            problems.append(f"{where}: [{label}] must be a table of \"contract name\" = \"your parameter's name\"")
            continue
        unknown = [n for n in names if n not in entry.parameters]
        if unknown:
            problems.append(f"{where}: [{label}]: {', '.join(map(repr, unknown))} is not a parameter of the contract; "
                            f"its parameters: {', '.join(entry.parameters) or 'none'}")
            continue
        theirs = list(names.values())
        if len(set(theirs)) != len(theirs):
            problems.append(f"{where}: [{label}]: two contract parameters are mapped to the same name of yours")
            continue
        pkg.parameters.setdefault(cid, {})[entry_name] = dict(names)
    return problems


def _fill_defaults(pkg: StudentPackage, catalogue: dict, default: str | None, where: str) -> None:
    """Entries the map leaves out: under their contract names in ``default``, or in layers.py at the root."""
    fallback = default or ("layers" if "layers.py" in pkg.data else None)
    for cid, ch in catalogue.items():
        for name in ch.entries:
            if pkg.target(cid, name) is not None or name in pkg.unmapped.get(cid, {}):
                continue  # mapped, or mapped badly: a bad line never falls back to a same-named class elsewhere
            if fallback is not None:
                rel = pkg.module_file(fallback)
                names = top_level_names(pkg.data[rel]) if rel else None
                if names is None or name in names:
                    pkg.targets.setdefault(cid, {})[name] = Target(fallback, name, rel or "")
                    continue
            pkg.unmapped.setdefault(cid, {})[name] = (
                f"{cid}.{name} is not mapped: add \"{cid}.{name}\" = \"your_module:YourName\" under "
                f"[tool.validator.map] in {where}" + (f" (it is not defined in {fallback})" if fallback else ""))
