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

Every Python file under the package root (hidden folders, ``__pycache__``, virtual
environments and run outputs left out) is read with :func:`validator.intake.read_submission_file`
(no links, regular files, capped); those bytes, and only those, are the code the worker
imports from a staged copy and what :mod:`validator.integrity` scans. The copy also holds
the package's small non-Python files (a config or vocabulary its code reads, within
:data:`MAX_DATA_FILES` / :data:`MAX_DATA_BYTES`) and a ``NAME-VERSION.dist-info`` made
from its ``pyproject.toml``, so ``importlib.metadata.version(NAME)`` works as it does
for the package's author (see :func:`package_metadata`).
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import tempfile
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file, size_label

MAX_MAP_BYTES = 64 << 10
MAX_PACKAGE_FILES = 200  # Python files: a CS336 repository holds 20-70, tests and scripts included
MAX_PACKAGE_BYTES = 16 << 20
MAX_DATA_FILES = 200  # non-Python files staged beside the code; more are left out, with a note
MAX_DATA_FILE_BYTES = MAX_SOURCE_BYTES  # one data file (larger ones, a dataset or a checkpoint, are left out)
MAX_DATA_BYTES = 8 << 20  # all data files together
MAX_PYPROJECT_BYTES = 256 << 10
MAX_WORKER_NOTES, MAX_NOTE_CHARS = 25, 600
SECTION = "[tool.validator]"
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_TARGET = re.compile(rf"^({_DOTTED}):([A-Za-z_][A-Za-z0-9_]*)$")
_MODULE = re.compile(rf"^{_DOTTED}$")
_KNOWN_KEYS = ("map", "parameters", "default")
_SKIP_DIRS = {"__pycache__", "node_modules", "site-packages", "dist-packages", "build", "dist"}
# Run outputs and data, left out unless the folder is a Python package (holds __init__.py): "wandb" anywhere,
# the others at the package root, where training scripts write them.
_RUN_DIRS = {"wandb", "mlruns", "lightning_logs"}
_ROOT_DATA_DIRS = {"data", "datasets", "outputs", "output", "out", "checkpoints", "ckpt", "ckpts", "runs", "logs",
                   "artifacts", "results", "cache", "tmp"}
# Never staged: compiled code, and archives Python could import from (zipimport) without the scan seeing them.
_NEVER_STAGED = (".pyc", ".pyo", ".pyd", ".so", ".dylib", ".dll", ".exe", ".pth", ".zip", ".egg", ".whl", ".pyz")


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
    resources: dict[str, bytes] = field(default_factory=dict)  # non-Python files staged beside the code
    generated: dict[str, bytes] = field(default_factory=dict)  # the grader's own files (the dist-info)

    @property
    def map_name(self) -> str:
        return self.map_file.name if self.map_arg is None else str(self.map_arg)

    def mapped_challenges(self, order: list[str]) -> list[str]:
        """The challenges (in ``order``) with at least one entry found through the mapping or its defaults."""
        return [cid for cid in order if self.targets.get(cid)]

    def stubbed_challenges(self, order: list[str]) -> list[str]:
        """The challenges (in ``order``) left out because a function of tests/adapters.py that reaches them still
        raises NotImplementedError (the course's stub), and nothing else maps them."""
        from validator.adapters import ADAPTERS_FILE

        return [cid for cid in order if not self.targets.get(cid) and any(
            ADAPTERS_FILE in why and "NotImplementedError" in why for why in self.unmapped.get(cid, {}).values())]

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

    def sandbox_files(self, into: str | os.PathLike | None = None) -> dict[str, str]:
        """Scratch name -> file, for :class:`validator.sandbox.Sandbox`: a staged copy of the bytes that were
        read and scanned (never the student's live files, which could change after the scan).

        Without ``into`` the copy goes to a private temporary folder, removed when this object is dropped.
        """
        if into is None:
            into = tempfile.mkdtemp(prefix="validator-package-")
            weakref.finalize(self, _remove_if_owner, into, os.getpid())
        folder = self.stage(into)
        return {rel: str(folder / rel) for rel in self.staged_names()}

    def staged_names(self) -> list[str]:
        return [*self.data, *self.resources, *self.generated]

    def stage(self, into: str | os.PathLike | None = None) -> Path:
        """Write the bytes that were read (and scanned), the data files and the package's metadata into a fresh
        folder; the worker imports from there."""
        folder = Path(into or tempfile.mkdtemp(prefix="validator-package-"))
        for part in (self.data, self.resources, self.generated):
            for rel, data in part.items():
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

    @staticmethod
    def worker_notes(load_reply: Any) -> list[str]:
        """The notes of a worker's load reply (modules replaced by placeholders), as bounded plain strings:
        the worker runs the student's code, so its reply is never trusted to be well-formed."""
        notes = load_reply.get("notes") if isinstance(load_reply, dict) else None
        if not isinstance(notes, list):
            return []
        return [n[:MAX_NOTE_CHARS] for n in notes[:MAX_WORKER_NOTES] if isinstance(n, str)]

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


def _skipped_dir(folder: str, name: str, at_root: bool) -> bool:
    """Folders never read: hidden ones, caches, build outputs, virtual environments, run outputs and data."""
    path = os.path.join(folder, name)
    if name.startswith(".") or name in _SKIP_DIRS or name.endswith((".dist-info", ".egg-info")) or os.path.islink(path):
        return True
    if os.path.exists(os.path.join(path, "pyvenv.cfg")) or os.path.isdir(os.path.join(path, "conda-meta")):
        return True
    if name in _RUN_DIRS or (at_root and name in _ROOT_DATA_DIRS):
        return not os.path.isfile(os.path.join(path, "__init__.py"))
    return False


def walk_package(root: Path) -> Iterator[tuple[str, Path]]:
    """``(relative posix path, path)`` of every file under ``root`` that a package's intake looks at, in a stable
    order: no links (neither files nor folders), no skipped folders (:func:`_skipped_dir`), no hidden files."""
    top = os.fspath(root)
    for folder, dirs, names in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not _skipped_dir(folder, d, folder == top))
        for name in sorted(names):
            path = Path(folder) / name
            if not name.startswith(".") and not path.is_symlink():
                yield path.relative_to(root).as_posix(), path


def _too_many(root: Path) -> str:
    counts: dict[str, int] = {}
    for rel, _ in walk_package(root):
        if rel.endswith(".py"):
            top = rel.split("/")[0] + "/" if "/" in rel else "the root"
            counts[top] = counts.get(top, 0) + 1
    biggest = ", ".join(f"{n} in {top}" for top, n in sorted(counts.items(), key=lambda kv: -kv[1])[:3])
    return (f"the package holds {sum(counts.values())} Python files, more than {MAX_PACKAGE_FILES}, the limit for "
            f"a submission ({biggest}): not graded; leave data, experiments, run outputs and environments out of "
            "its root (folders named data, outputs, checkpoints, runs, wandb... at the root are skipped)")


def read_files(root: Path) -> tuple[dict[str, Path], dict[str, bytes], list[str]]:
    """Every Python file under ``root`` (links are not followed), read with the intake's bounds."""
    files: dict[str, Path] = {}
    data: dict[str, bytes] = {}
    problems: list[str] = []
    total = 0
    for rel, path in walk_package(root):
        if not rel.endswith(".py"):
            continue
        if len(files) >= MAX_PACKAGE_FILES:
            problems.append(_too_many(root))
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


def read_resources(root: Path, code: dict[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """The package's non-Python files to stage beside its code, and a note on those left out.

    Files in a folder that holds Python code come first, then the smaller ones; a file over
    :data:`MAX_DATA_FILE_BYTES`, or past :data:`MAX_DATA_FILES` / :data:`MAX_DATA_BYTES` in all, is
    left out (a dataset, a checkpoint, a PDF). Compiled code (``.so``, ``.pyc``) is never staged.
    A data file is never a reason not to grade.
    """
    code_dirs = {rel.rpartition("/")[0] for rel in code}
    candidates = []
    for rel, path in walk_package(root):
        if rel.endswith(".py") or rel.lower().endswith(_NEVER_STAGED):
            continue
        try:
            size = path.lstat().st_size
        except OSError:
            continue
        candidates.append((rel.rpartition("/")[0] not in code_dirs, size, rel, path))
    staged: dict[str, bytes] = {}
    large, over, unreadable = [], [], []
    total = 0
    for _, size, rel, path in sorted(candidates):
        if size > MAX_DATA_FILE_BYTES:
            large.append(f"{rel} ({_mib(size)})")
            continue
        if len(staged) >= MAX_DATA_FILES or total + size > MAX_DATA_BYTES:
            over.append(rel)
            continue
        try:
            raw = read_submission_file(path, cap=MAX_DATA_FILE_BYTES, what=rel)
        except IntakeError:
            unreadable.append(rel)
            continue
        if total + len(raw) > MAX_DATA_BYTES:
            over.append(rel)
            continue
        staged[rel] = raw
        total += len(raw)
    parts = []
    if large:
        parts.append(f"{_few(large)} (over {size_label(MAX_DATA_FILE_BYTES)} each)")
    if over:
        parts.append(f"{_few(over)} (past the {MAX_DATA_FILES} files or {size_label(MAX_DATA_BYTES)} staged for "
                     "data, small files and those next to the code first)")
    if unreadable:
        parts.append(f"{_few(unreadable)} (not regular files)")
    notes = []
    if parts:
        count = len(large) + len(over) + len(unreadable)
        notes.append(f"{count} non-Python file{'s' * (count > 1)} of the package {'are' if count > 1 else 'is'} not "
                     f"in the grader's copy, so code that reads {'them' if count > 1 else 'it'} there will not find "
                     f"{'them' if count > 1 else 'it'}: " + "; ".join(parts))
    return staged, notes


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _few(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _remove_if_owner(folder: str, owner: int) -> None:
    """Remove a private staged copy, only in the process that made it (a forked child shares the finalizer)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


# -- the package's metadata, so importlib.metadata.version() works on the staged copy ------------------
_PROJECT_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")  # PEP 508
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$")
FALLBACK_VERSION = "0.0.0"


def package_metadata(root: Path, code: dict[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """``NAME-VERSION.dist-info/METADATA`` files for the staged copy, and notes.

    The name and version come from ``[project]`` in ``ROOT/pyproject.toml``. A dynamic or missing
    version is read, without running anything, from where the build backend would
    (``[tool.setuptools.dynamic] version = {attr = ...}``, ``[tool.hatch.version] path``,
    ``[tool.poetry] version``); failing that it is :data:`FALLBACK_VERSION`, with a note when the
    package's code reads its metadata. Each top-level package (a folder with ``__init__.py``) whose
    name differs from the project's gets the same metadata under its own name, so
    ``importlib.metadata.version("cs336_basics")`` works whether the project is called
    ``cs336-basics``, ``cs336_basics`` or something else.
    """
    from validator.tomlcompat import tomllib

    doc: dict[str, Any] = {}
    try:
        doc = tomllib.loads(read_submission_file(root / "pyproject.toml", cap=MAX_PYPROJECT_BYTES).decode("utf-8"))
    except (IntakeError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        pass
    project = doc.get("project") if isinstance(doc.get("project"), dict) else {}
    name = project.get("name") if isinstance(project.get("name"), str) else None
    name = name if name and _PROJECT_NAME.match(name) else None
    version = project.get("version")
    dynamic = project.get("dynamic") if isinstance(project.get("dynamic"), list) else []
    why = None
    if not isinstance(version, str) or "version" in dynamic or not _VERSION.match(version):
        version = _static_version(doc, code)
        if version is None:
            version = FALLBACK_VERSION
            why = ("its version is dynamic" if "version" in dynamic else "it gives no version") if name else                 "pyproject.toml has no [project] name and version"
    tops = sorted(rel.split("/")[0] for rel in code if rel.count("/") == 1 and rel.endswith("/__init__.py"))
    names = [name] if name else []
    for top in tops:
        if not top.startswith("test") and all(_normal(top) != _normal(n) for n in names):
            names.append(top)
    files = {f"{_normal(n)}-{version.replace('-', '_')}.dist-info/METADATA":
             f"Metadata-Version: 2.1\nName: {n}\nVersion: {version}\n".encode() for n in names}
    notes = []
    reads_metadata = any(b"metadata" in src or b"pkg_resources" in src for src in code.values())
    if why and names and reads_metadata:
        notes.append(f"the package's metadata has no version ({why}): in the grader, importlib.metadata.version("
                     f"{names[0]!r}) returns {FALLBACK_VERSION!r}")
    return files, notes


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _static_version(doc: dict[str, Any], code: dict[str, bytes]) -> str | None:
    """A dynamic version where the build backend would find it, read without running anything."""
    tool = doc.get("tool") if isinstance(doc.get("tool"), dict) else {}
    setuptools = tool.get("setuptools") if isinstance(tool.get("setuptools"), dict) else {}
    dynamic = setuptools.get("dynamic") if isinstance(setuptools.get("dynamic"), dict) else {}
    spec = dynamic.get("version") if isinstance(dynamic.get("version"), dict) else {}
    found = None
    if isinstance(spec.get("attr"), str) and "." in spec["attr"]:
        module, _, attr = spec["attr"].rpartition(".")
        base = module.replace(".", "/")
        rel = next((r for r in (f"{base}.py", f"{base}/__init__.py") if r in code), None)
        found = _literal(code[rel], attr) if rel else None
    hatch = tool.get("hatch") if isinstance(tool.get("hatch"), dict) else {}
    path = (hatch.get("version") or {}).get("path") if isinstance(hatch.get("version"), dict) else None
    if found is None and isinstance(path, str) and path in code:
        found = _literal(code[path], "__version__")
    poetry = tool.get("poetry") if isinstance(tool.get("poetry"), dict) else {}
    if found is None and isinstance(poetry.get("version"), str):
        found = poetry["version"]
    return found if isinstance(found, str) and _VERSION.match(found) else None


def _literal(source: bytes, name: str) -> str | None:
    """The string a module assigns to ``name`` at its top level, if it is a plain literal."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and isinstance(node.value.value, str):
                return node.value.value
    return None


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
    else:  # graded through tests/adapters.py alone (which then names the package, where it has no pyproject.toml)
        section, prefix = {}, "tool.validator."
        if not map_file.is_file():
            from validator.adapters import ADAPTERS_FILE
            map_file = root / ADAPTERS_FILE
    files, data, read_problems = read_files(root)
    pkg = StudentPackage(root=root, map_file=map_file, map_arg=map_arg, files=files, data=data)
    if not read_problems:
        pkg.resources, data_notes = read_resources(root, data)
        pkg.generated, meta_notes = package_metadata(root, data)
        pkg.notes.extend(data_notes + meta_notes)
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
    """Entries an implemented function of tests/adapters.py reaches are graded through it, unless a map line names
    them: a line of [tool.validator.map] is said on purpose, for this grader; the adapters are the course's default.
    (The ``default`` module and a root layers.py, filled in after this, are fallbacks below both.)"""
    from validator import adapters

    source = pkg.data.get(adapters.ADAPTERS_FILE)
    if source is None:
        return
    functions = adapters.adapter_functions(source)
    if functions is None:  # it does not parse: grade what it should reach, and let the import say why it fails
        functions = {a.function: adapters.AdapterFunction(a.function, 0, False) for ch in catalogue.values()
                     for e in ch.entries.values() for a in e.adapters}
    reached, stubbed = adapters.reach(functions, catalogue)
    kept = []
    for cid, entries in reached.items():
        for name, variants in entries.items():
            if pkg.target(cid, name) is not None or name in pkg.unmapped.get(cid, {}):
                kept.append(f"{cid}.{name}")  # a map line (even a broken one) says how to reach it
                continue
            pkg.targets.setdefault(cid, {})[name] = Target(
                adapters.ADAPTERS_MODULE, variants[0].function, adapters.ADAPTERS_FILE, "adapter",
                adapter=adapters.entry_data(catalogue[cid], catalogue[cid].entries[name], variants))
    for cid, entries in stubbed.items():
        for name, why in entries.items():
            if pkg.target(cid, name) is None and name not in pkg.unmapped.get(cid, {}):
                pkg.unmapped.setdefault(cid, {})[name] = why
    if kept:
        pkg.notes.append(f"graded through your [tool.validator.map] lines, not {adapters.ADAPTERS_FILE}, for "
                         f"{', '.join(kept)}; {adapters.ADAPTERS_FILE} reaches the other challenges")


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
