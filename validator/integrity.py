"""A grader-side scan of every Python file of a submission for constructs a layer has no use for.

Runs in the grader, never in the worker, on the bytes the importer will read,
decoded exactly as the importer decodes them (a PEP 263 coding cookie is
honoured, and a cookie other than UTF-8 is itself a finding: ``utf-7`` lets
``F.embedding`` hide as ``F+AC4-embedding``). It follows the submission's own
imports to the helper modules beside ``layers.py``, so a helper cannot hide what
``layers.py`` would show.

A *finding* is a use of a construct (threads, processes, ``ctypes``, dynamic code,
reflective access to torch internals, ``gc``, ``inspect``, frame access, a
``getattr`` with a computed name on a module) or of an API the challenge forbids.
An import of such a name that is never used is *advice*: real student code
leaves such lines behind, and an unused name does nothing. So is a forbidden API
used outside the code the graded entries may run (a ``generate()`` beside the
layer, see :mod:`validator.reachability`); constructs count wherever they are.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import functools
import io
import tokenize
from dataclasses import dataclass
from pathlib import Path

from validator.intake import MAX_SOURCE_BYTES as MAX_FILE_BYTES  # one cap for every reader of a submission
from validator.reachability import Source, reachable_lines

MAX_FILES = 20

# construct id -> dotted names (a name covers its attributes: "torch._C" covers "torch._C._foo")
CONSTRUCTS: dict[str, tuple[str, ...]] = {
    "threads": ("threading", "_thread", "concurrent", "asyncio", "torch.multiprocessing", "queue"),
    "processes": ("multiprocessing", "subprocess", "pty", "os.fork", "os.forkpty", "os.system", "os.popen",
                  "os.spawnl", "os.spawnle", "os.spawnlp", "os.spawnlpe", "os.spawnv", "os.spawnve",
                  "os.spawnvp", "os.spawnvpe", "os.posix_spawn", "os.posix_spawnp", "os.execl", "os.execle",
                  "os.execlp", "os.execlpe", "os.execv", "os.execve", "os.execvp", "os.execvpe", "os.kill",
                  "signal"),
    "ctypes": ("ctypes", "_ctypes", "cffi", "mmap"),
    "dynamic_code": ("exec", "eval", "compile", "__import__", "importlib", "runpy", "builtins",
                     "__builtins__", "marshal", "pickle", "types.CodeType", "types.FunctionType"),
    "torch_internals": ("torch._C", "torch.utils._python_dispatch", "torch._dispatch", "torch.overrides",
                        "torch.library", "torch._ops", "torch._library", "torch.profiler", "torch.autograd.profiler",
                        "torch._subclasses", "torch._dynamo", "torch.fx", "torch.utils._mode_utils",
                        "__torch_dispatch__", "__torch_function__"),
    "gc": ("gc",),
    "inspect": ("inspect", "dis", "traceback"),
    "frames": ("sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile", "sys.modules",
               "sys.addaudithook", "sys.meta_path", "sys.path_hooks", "threading.settrace"),
    "computed_getattr": (),  # getattr/setattr/vars on a module with a name that is not a literal
    "coding_cookie": (),     # a source encoding other than UTF-8
}

# Names under a construct's prefix that are no such construct: reading a package's metadata or its data files
# is not dynamic code, though both live in importlib (CS336's __init__.py reads its own version). Not listed:
# entry points and distributions (an entry point's load() imports by name).
NOT_CONSTRUCTS: tuple[str, ...] = (
    "importlib.metadata.version", "importlib.metadata.metadata", "importlib.metadata.requires",
    "importlib.metadata.files", "importlib.metadata.packages_distributions", "importlib.metadata.PackageNotFoundError",
    "importlib.resources.as_file",
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
    "dynamic_code": "dynamic code (exec/eval/compile/__import__/importlib)",
    "torch_internals": "reflective access to torch internals (torch._C, dispatch modes, profiler)",
    "gc": "the garbage collector's object graph (gc)",
    "inspect": "introspection of running code (inspect)",
    "frames": "interpreter frames and hooks (sys._getframe, sys.modules, ...)",
    "computed_getattr": "getattr on a module with a computed name",
    "coding_cookie": "a source encoding other than UTF-8",
}


@dataclass(frozen=True)
class Finding:
    file: str       # the file's name as the student knows it (layers.py, helpers.py)
    line: int
    what: str       # a construct id, or the forbidden API's dotted name
    code: str       # the source line, stripped
    construct: bool  # True for an integrity construct, False for an API the challenge forbids
    unused_import: bool = False  # an import whose name is never used: advice only
    reachable: bool = True  # in code the graded entries may run (validator.reachability); else advice only

    def describe(self) -> str:
        label = DESCRIPTIONS.get(self.what, self.what) if self.construct else f"uses {self.what}"
        if self.unused_import:
            return f"{self.file}:{self.line}: `{self.code}` imports {self.what} but never uses it"
        if not self.reachable:
            used = label if self.construct else f"uses {self.what}"
            return (f"{self.file}:{self.line}: `{self.code}` {used.removeprefix('uses ')} in code the graded layer "
                    "never runs (it costs nothing here; the layer itself must not use it)")
        return f"{self.file}:{self.line}: `{self.code}`: {label}"

    @property
    def advice_only(self) -> bool:
        """Costs no points: an import never used, or a forbidden API outside the code the entries run."""
        return self.unused_import or not self.reachable


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


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _covers(prefix: str, name: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _matches_api(name: str, banned: list[str]) -> str | None:
    name = name.replace("torch.nn.modules.sparse.", "torch.nn.")
    for api in banned:
        if ("*" in api or "?" in api or "[" in api) and fnmatch.fnmatchcase(name, api):
            return api if api == name else name
        if api == name:
            return api
    return None


def _construct_of(name: str, allow: set[str]) -> str | None:
    if any(_covers(read, name) for read in NOT_CONSTRUCTS + _RESOURCE_READERS):
        return None  # a resource reader's argument is judged where it is called (_Scanner.call)
    for construct, prefixes in CONSTRUCTS.items():
        if construct in allow:
            continue
        if any(_covers(p, name) for p in prefixes):
            return construct
    return None


_BUILTINS = {"exec", "eval", "compile", "__import__", "__builtins__", "breakpoint"}
_DUNDERS = {"__globals__": "frames", "__code__": "frames", "__closure__": "frames", "__builtins__": "dynamic_code",
            "__subclasses__": "frames", "__torch_dispatch__": "torch_internals",
            "__torch_function__": "torch_internals"}


class _Scanner:
    def __init__(self, file: str, source: str, banned: list[str], allow: set[str]):
        self.file = file
        self.lines = source.splitlines()
        self.banned = banned
        self.allow = allow
        self.tree = ast.parse(source, filename=file)
        self.aliases: dict[str, str] = {}     # bound name -> dotted name it stands for
        self.imports: list[tuple[int, str, str]] = []  # (line, bound name, dotted name)
        self.used: set[str] = set()           # bound names loaded somewhere
        self.found: dict[tuple[int, str], Finding] = {}
        self.followed: list[str] = []         # modules named by literal strings that a call imports
        self.assigned = {n.id for n in ast.walk(self.tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.assigned |= {n.name for n in ast.walk(self.tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        self.assigned |= {a.arg for n in ast.walk(self.tree) if isinstance(n, ast.arguments)
                          for a in n.args + n.kwonlyargs + n.posonlyargs}

    def code(self, line: int) -> str:
        return self.lines[line - 1].strip()[:160] if 0 < line <= len(self.lines) else ""

    def add(self, line: int, what: str, construct: bool, unused: bool = False) -> None:
        key = (line, what)
        if key not in self.found:
            self.found[key] = Finding(self.file, line, what, self.code(line), construct, unused)

    def resolve(self, dotted: str) -> str | None:
        """The dotted name an expression stands for; None for a local name that is no import or builtin."""
        head, _, rest = dotted.partition(".")
        if head in self.aliases:
            base = self.aliases[head]
        elif head in _BUILTINS and head not in self.assigned:
            base = head
        else:
            return None
        return base + (f".{rest}" if rest else "")

    def classify(self, line: int, name: str | None, constructs: bool = True) -> None:
        if name is None:
            return
        api = _matches_api(name, self.banned)
        if api:
            self.add(line, api, False)
        construct = _construct_of(name, self.allow) if constructs else None
        if construct:
            self.add(line, construct, True)

    def run(self) -> list[Finding]:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    bound = a.asname or a.name.split(".")[0]
                    self.aliases[bound] = a.name if a.asname else a.name.split(".")[0]
                    self.imports.append((node.lineno, bound, a.name))
            elif isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for a in node.names:
                    if a.name == "*":
                        self.classify(node.lineno, f"{module}.*")
                        self.classify(node.lineno, module)
                        continue
                    bound = a.asname or a.name
                    self.aliases[bound] = f"{module}.{a.name}"
                    self.imports.append((node.lineno, bound, f"{module}.{a.name}"))
        # a construct is judged on a whole dotted name (importlib.metadata.version is no dynamic import), an API on
        # every part of one (F.embedding.__call__ uses F.embedding)
        inner = {id(n.value) for n in ast.walk(self.tree) if isinstance(n, ast.Attribute)}
        called = {id(n.func) for n in ast.walk(self.tree) if isinstance(n, ast.Call)}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                self.used.add(node.id)
            if isinstance(node, ast.Attribute) and node.attr in _DUNDERS and _DUNDERS[node.attr] not in self.allow:
                self.add(node.lineno, _DUNDERS[node.attr], True)
            if isinstance(node, ast.Attribute) and node.attr == "__dict__" and "computed_getattr" not in self.allow:
                inner = _dotted(node.value)
                if inner and inner.split(".")[0] in self.aliases:
                    self.add(node.lineno, "computed_getattr", True)
            if isinstance(node, (ast.Attribute, ast.Name)):
                dotted = _dotted(node)
                if dotted and not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)):
                    name = self.resolve(dotted)
                    whole = id(node) not in inner
                    self.classify(node.lineno, name, constructs=whole)
                    if whole and id(node) not in called and name in _RESOURCE_READERS \
                            and "dynamic_code" not in self.allow:
                        self.add(node.lineno, "dynamic_code", True)  # passed around: what it will import is unknown
            elif isinstance(node, ast.FunctionDef) and node.name in ("__torch_dispatch__", "__torch_function__") \
                    and "torch_internals" not in self.allow:
                self.add(node.lineno, "torch_internals", True)
            elif isinstance(node, ast.Call):
                self.call(node)
        used_lines = {(f.line, f.what) for f in self.found.values()}
        for line, bound, dotted in self.imports:
            if bound in self.used:
                continue  # its uses are reported where they happen
            construct = None if dotted in _READ_MODULES else _construct_of(dotted, self.allow)
            hits = [(_matches_api(dotted, self.banned), False), (construct, True)]
            for what, construct in hits:
                if what and (line, what) not in used_lines:
                    self.add(line, what, construct, unused=True)
        return sorted(self.found.values(), key=lambda f: (f.line, f.what))

    def call(self, node: ast.Call) -> None:
        func = _dotted(node.func)
        if func is not None and self.resolve(func) in _RESOURCE_READERS:
            self.resource_read(node)
            return
        if func not in ("getattr", "setattr", "delattr", "hasattr", "vars") or not node.args:
            return
        target = _dotted(node.args[0])
        if target is None:
            return
        on_module = target.split(".")[0] in self.aliases
        if func == "vars":
            if on_module:
                self.add(node.lineno, "computed_getattr", True)
            return
        name = node.args[1] if len(node.args) > 1 else None
        literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
        if literal:
            resolved = self.resolve(target)
            self.classify(node.lineno, f"{resolved}.{name.value}" if resolved else None)
        elif on_module and "computed_getattr" not in self.allow:
            self.add(node.lineno, "computed_getattr", True)

    def resource_read(self, node: ast.Call) -> None:
        """``importlib.resources.files(anchor)`` imports ``anchor`` when it names a module: follow a literal name
        like an import; the module's own name imports nothing; any other name is dynamic code."""
        keywords = {k.arg: k.value for k in node.keywords if k.arg in ("anchor", "package")}
        anchor = node.args[0] if node.args else next(iter(keywords.values()), None)
        if anchor is None or _dotted(anchor) in _OWN_MODULE or _dotted(anchor) == "__spec__.parent":
            return
        if isinstance(anchor, ast.Constant) and isinstance(anchor.value, str):
            self.followed.append(anchor.value)
        elif "dynamic_code" not in self.allow:
            self.add(node.lineno, "dynamic_code", True)


@functools.lru_cache(maxsize=16)
def _scanned(file: str, source: str, banned: tuple[str, ...], allow: frozenset[str]
             ) -> tuple[tuple[Finding, ...], tuple[tuple[int, str, tuple[str, ...]], ...]]:
    """One file's findings and its import statements as (level, module, names) (``import a.b`` is
    ``(0, "", ("a.b",))``); SyntaxError if it does not parse.

    Every source check of every challenge scans the same files: each distinct (file, text, bans)
    is parsed and walked once per process, not once per check. The tree itself is not kept (a
    long-lived batch grader would hold megabytes per file).
    """
    scanner = _Scanner(file, source, list(banned), set(allow))
    found = tuple(scanner.run())
    statements = []
    for node in ast.walk(scanner.tree):
        if isinstance(node, ast.Import):
            statements.append((0, "", tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            statements.append((node.level or 0, node.module or "", tuple(a.name for a in node.names)))
    statements.extend((0, "", (module,)) for module in scanner.followed)
    return found, tuple(statements)


def scan_source(source: str, banned: list[str], allow: set[str] | frozenset = frozenset(),
                file: str = "layers.py") -> list[Finding]:
    """Findings in one decoded source; raises SyntaxError if it does not parse."""
    return list(_scanned(file, source, tuple(banned), frozenset(allow))[0])


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
    return [f if f.line in lines.get(f.file, ()) else dataclasses.replace(f, reachable=False) for f in findings]


def scan_submission(student_file: str | Path, banned: list[str], allow: set[str] | frozenset = frozenset(),
                    entries: list[str] | None = None) -> list[Finding]:
    """Scan ``layers.py`` and every helper module beside it that it (transitively) imports.

    With ``entries`` (names defined in ``layers.py``), a forbidden API outside the code they may run is
    marked ``reachable=False``.
    """
    student_file = Path(student_file)
    folder = student_file.parent
    queue, seen, findings = [student_file], set(), []
    sources: list[Source] = []
    while queue and len(seen) < MAX_FILES:
        path = queue.pop(0)
        if path.name in seen:
            continue
        seen.add(path.name)
        data = read_bytes(path)
        text, cookie = decode_source(path.name, data)
        findings.extend(f for f in cookie if f.what not in allow)
        try:
            found, statements = _scanned(path.name, text, tuple(banned), frozenset(allow))
        except SyntaxError as exc:
            raise Unreadable(f"{path.name} does not parse: line {exc.lineno}: {exc.msg}") from None
        findings.extend(found)
        package = path.name == "__init__.py"
        sources.append(Source(path.parent.name if package else path.stem, path.name, text, package))
        for module in _imported_modules(statements):
            top = module.lstrip(".").split(".")[0]
            for candidate in (folder / f"{top}.py", folder / top / "__init__.py"):
                if top and candidate.name != student_file.name and candidate.exists() and candidate != path:
                    queue.append(candidate)
                    break
    roots = None if entries is None else [(student_file.stem, name) for name in entries]
    return _judge_reach(findings, sources, roots)


MAX_PACKAGE_SCAN = 200


def scan_package(files: dict[str, bytes], modules: list[str], banned: list[str],
                 allow: set[str] | frozenset = frozenset(), entries: list[tuple[str, str]] | None = None
                 ) -> list[Finding]:
    """Scan what importing ``modules`` from a student's package runs, and every module of it they import.

    ``files`` maps each Python file of the package (relative posix path) to the bytes the
    intake read, which are the bytes the worker imports. Importing ``a.b.c`` runs
    ``a/__init__.py`` and ``a/b/__init__.py`` first, so those are scanned too; imports
    (absolute, or relative to the importing module's package) of modules that are files of
    the package are followed. Findings name files by their path in the package. With ``entries``
    (``(module, name)`` pairs), a forbidden API outside the code they may run is marked ``reachable=False``.
    """
    def module_file(module: str) -> str | None:
        base = module.replace(".", "/")
        return next((rel for rel in (f"{base}.py", f"{base}/__init__.py") if rel in files), None)

    def chain(module: str) -> list[str]:
        parts = module.split(".")
        return [rel for i in range(1, len(parts) + 1) if (rel := module_file(".".join(parts[:i])))]

    queue = [rel for m in modules for rel in chain(m)]
    seen: set[str] = set()
    findings: list[Finding] = []
    sources: list[Source] = []
    while queue and len(seen) < MAX_PACKAGE_SCAN:
        rel = queue.pop(0)
        if rel in seen:
            continue
        seen.add(rel)
        text, cookie = decode_source(rel, files[rel])
        findings.extend(f for f in cookie if f.what not in allow)
        try:
            found, statements = _scanned(rel, text, tuple(banned), frozenset(allow))
        except SyntaxError as exc:
            raise Unreadable(f"{rel} does not parse: line {exc.lineno}: {exc.msg}") from None
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
    return _judge_reach(findings, sources, entries)
