"""The reference frozen as data: record its results while grading it, replay them where it is absent.

Recording grades the reference itself (it plays the student) for a fixed set
of seeds and profiles; every call that reaches ``Context.reference_call`` or
``reference_raw`` is stored under a hash of the call's plain data (tensors by
dtype, shape and bytes). A student in a handout runs the same hypothesis
search on the same seed: every case a correct layer sees was recorded, and a
broken one fails on a recorded case before the search diverges. A case that
was not recorded (a shrink step, usually) is rejected, so shrinking only
walks recorded cases; a miss outside a search defers the check to official
grading.

Files: ``challenges/fixtures/<id>.frozen``, an xz-compressed message in the
worker's wire format (a JSON header plus raw tensor bytes). Loading it builds
plain tensors from bytes and never unpickles anything.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import torch

from validator.context import ReferenceUnavailable
from validator.worker.protocol import ProtocolError, _count_tensors, _decode, dtype_name, pack, tensor_bytes

FORMAT = 1
SUFFIX = ".frozen"
KEY_HEX = 24  # 96 bits of sha256: no collision in any realistic catalogue
RECORD_SEEDS = (11, 23, 47)
RECORD_PROFILES = ("quick", "default")
# Tests that measure the reference itself (its wall time): no stored value can stand in for it.
LIVE_ONLY_TESTS = frozenset({"time_ratio"})
DEFERRED = "deferred to official grading"


def fixture_path(challenges_dir: Path, challenge_id: str) -> Path:
    return Path(challenges_dir) / "fixtures" / f"{challenge_id}{SUFFIX}"


def live_only(test_name: str) -> bool:
    from validator import checks

    return test_name in LIVE_ONLY_TESTS or bool(getattr(checks.get(test_name), "live_reference", False))


# -- the key --------------------------------------------------------------------
def _feed(h: "hashlib._Hash", obj: Any) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        h.update(f"T{dtype_name(t.dtype)}{list(t.shape)}{t.device.type}|".encode())
        if t.device.type != "meta" and t.numel():
            h.update(tensor_bytes(t))
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}|".encode())
        for k in sorted(obj, key=str):
            _feed(h, str(k))
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}|".encode())
        for v in obj:
            _feed(h, v)
    elif isinstance(obj, torch.dtype):
        h.update(f"y{dtype_name(obj)}|".encode())
    elif obj is None or isinstance(obj, (bool, int, float, str)):
        h.update(f"{type(obj).__name__[0]}{obj!r}|".encode())
    else:
        h.update(f"?{type(obj).__name__}:{obj!r}|".encode())


def call_key(call: dict) -> str:
    """A stable hash of a call's plain data: equal calls, equal keys, across processes and machines."""
    h = hashlib.sha256()
    _feed(h, call)
    return h.hexdigest()[:KEY_HEX]


def plain_result(result: dict) -> dict:
    """What is stored of a reference result: no timing, and no source lines of the reference in exceptions."""
    out = {k: v for k, v in result.items() if k != "seconds"}
    if isinstance(out.get("exception"), dict):
        out["exception"] = {k: v for k, v in out["exception"].items() if k in ("type", "mro", "message")}
    return out


# -- the file -------------------------------------------------------------------
def encode(data: dict) -> bytes:
    return lzma.compress(pack(data), preset=9 | lzma.PRESET_EXTREME)


def decode(blob: bytes) -> dict:
    raw = lzma.decompress(blob)
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(raw):
            raise ProtocolError("truncated fixture file")
        out = raw[pos: pos + n]
        pos += n
        return out

    (hlen,) = struct.unpack("<I", take(4))
    header = json.loads(take(hlen))
    buffers = []
    for _ in range(_count_tensors(header)):
        (blen,) = struct.unpack("<Q", take(8))
        buffers.append(take(blen))
    return _decode(header, buffers)


@dataclass
class FixtureFile:
    challenge: str
    fingerprint: str
    seeds: list[int]
    profiles: list[str]
    deferred: list[str]
    versions: dict[str, str]
    results: dict[str, dict] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return encode({"format": FORMAT, "challenge": self.challenge, "fingerprint": self.fingerprint,
                       "seeds": list(self.seeds), "profiles": list(self.profiles),
                       "deferred": list(self.deferred), "versions": dict(self.versions),
                       "results": {k: self.results[k] for k in sorted(self.results)}})

    @classmethod
    def read(cls, path: Path) -> "FixtureFile":
        data = decode(Path(path).read_bytes())
        if data.get("format") != FORMAT:
            raise ValueError(f"{path}: fixture format {data.get('format')!r}, this validator reads {FORMAT}")
        return cls(challenge=data["challenge"], fingerprint=data["fingerprint"], seeds=data["seeds"],
                   profiles=data["profiles"], deferred=data["deferred"], versions=data["versions"],
                   results=data["results"])

    @staticmethod
    def read_header(path: Path) -> dict:
        data = decode(Path(path).read_bytes())
        data.pop("results", None)
        return data


def versions() -> dict[str, str]:
    import hypothesis

    return {"hypothesis": hypothesis.__version__, "torch": torch.__version__.split("+")[0]}


# -- recording ------------------------------------------------------------------
_META_ATTRS = frozenset({"shape", "dtype", "device", "requires_grad", "ndim", "layout", "is_meta", "is_sparse",
                         "is_cuda", "is_quantized", "is_leaf", "grad_fn", "names"})
_META_FUNCS = frozenset({"size", "dim", "numel", "nelement", "ndimension", "is_floating_point", "is_complex",
                         "element_size", "__len__"})


def _tensors(obj: Any, path: tuple = ()):
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _tensors(v, path + (k,))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _tensors(v, path + (i,))


def _replace(obj: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(obj, dict):
        return {**obj, head: _replace(obj[head], rest, value)}
    out = list(obj)
    out[head] = _replace(out[head], rest, value)
    return out


class _UseTracker:
    """A TorchFunctionMode that notes which recorded tensors a check reads beyond their shape and dtype."""

    def __new__(cls, watched: dict[int, tuple], used: set):
        from torch.overrides import TorchFunctionMode

        class Tracker(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                name = getattr(func, "__name__", "")
                if name == "__get__":
                    metadata = getattr(getattr(func, "__self__", None), "__name__", "") in _META_ATTRS
                else:
                    metadata = name in _META_FUNCS
                if not metadata and watched:
                    for _, t in _tensors([list(args), dict(kwargs or {})]):
                        hit = watched.get(id(t))
                        if hit is not None:
                            used.add(hit)
                return func(*args, **(kwargs or {}))

        return Tracker()


class Recorder:
    """Collects reference results by key while the reference is graded; paused for live-only checks.

    While a check runs, a function mode watches the results it was given: a tensor that no check
    ever reads beyond its shape and dtype (a performance check sizing its upstream gradient) is
    stored as a meta tensor, shape and dtype without data.
    """

    def __init__(self) -> None:
        self.results: dict[str, dict] = {}
        self.active = True
        self.used: set[tuple[str, tuple]] = set()
        self._watched: dict[int, tuple[str, tuple]] = {}
        self._alive: list[torch.Tensor] = []
        self._mode = None

    def __call__(self, call: dict, result: dict) -> None:
        if not self.active:
            return
        key = call_key(call)
        self.results.setdefault(key, plain_result(result))
        for path, t in _tensors(result):
            self._watched[id(t)] = (key, path)
            self._alive.append(t)

    def begin_check(self) -> None:
        if self.active and self._mode is None:
            self._mode = _UseTracker(self._watched, self.used)
            self._mode.__enter__()

    def end_check(self) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        self._watched.clear()
        self._alive.clear()

    def slimmed(self) -> dict[str, dict]:
        """The results with never-read tensors reduced to their shape and dtype."""
        out = {}
        for key, result in self.results.items():
            for path, t in list(_tensors(result)):
                if (key, path) not in self.used and t.device.type != "meta" and t.numel() > 1:
                    result = _replace(result, path, torch.empty(t.shape, dtype=t.dtype, device="meta"))
            out[key] = result
        return out


# -- replay ---------------------------------------------------------------------
class FrozenReference:
    """Answers reference calls from fixture files; counts hits and misses per check."""

    def __init__(self, files: dict[str, FixtureFile]):
        self.files = files
        self.hits = 0
        self.misses = 0

    @classmethod
    def load(cls, challenges_dir: Path, ids: Iterable[str]) -> "FrozenReference":
        files = {}
        for cid in ids:
            path = fixture_path(challenges_dir, cid)
            if path.exists():
                files[cid] = FixtureFile.read(path)
        return cls(files)

    def reset(self) -> None:
        self.hits = self.misses = 0

    def seeds(self, challenge_ids: Iterable[str]) -> list[int]:
        sets = [set(self.files[c].seeds) for c in challenge_ids if c in self.files]
        return sorted(set.intersection(*sets)) if sets else []

    def profiles(self, challenge_ids: Iterable[str]) -> list[str]:
        sets = [set(self.files[c].profiles) for c in challenge_ids if c in self.files]
        return [p for p in RECORD_PROFILES if all(p in s for s in sets)] if sets else []

    def lookup(self, challenge_id: str, call: dict) -> dict:
        """The frozen result; a miss rejects the hypothesis example, or defers a check outside one."""
        stored = self.files.get(challenge_id)
        found = stored.results.get(call_key(call)) if stored else None
        if found is not None:
            self.hits += 1
            return dict(found)
        self.misses += 1
        from hypothesis import currently_in_test_context, reject

        if currently_in_test_context():
            reject()
        raise ReferenceUnavailable(f"{DEFERRED}: no frozen reference result for this input")


# -- staleness ------------------------------------------------------------------
_GRADER_SOURCES = ("cases.py", "context.py", "runner.py", "profiles.py", "spec/schema.py",
                   "worker/protocol.py", "checks/*.py", "instructor/fixtures.py")


_DOC_ONLY = ("title", "summary", "contract", "background", "hints", "questions", "strength")
_CHECK_DOC_ONLY = ("title", "hint", "points", "advisory")


def _code_digest(path: Path) -> bytes:
    """Python source by its syntax tree, so comments and layout do not make fixtures stale."""
    import ast

    text = path.read_text(encoding="utf-8")
    try:
        return ast.dump(ast.parse(text)).encode()
    except SyntaxError:
        return text.encode()


def _defined_names(node: Any) -> set[str]:
    import ast

    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def reference_digest(reference_file: Path, names: Iterable[str]) -> bytes:
    """The part of the reference that ``names`` depend on: their definitions and, transitively, every
    module-level statement defining a name they use (helpers, constants, imports). Another class
    added to or edited in the reference leaves this unchanged, so its fixture stays fresh.

    Module-level statements that define nothing (a bare call, an ``if`` block) may affect anything
    and are always included. A file that does not parse falls back to its whole text.
    """
    import ast

    text = Path(reference_file).read_text(encoding="utf-8")
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text.encode()
    defines = [_defined_names(node) for node in tree.body]
    docstring = (lambda node: isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                 and isinstance(node.value.value, str))
    keep = [not d and not docstring(node) for node, d in zip(tree.body, defines)]
    wanted, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        for i, node in enumerate(tree.body):
            if name in defines[i] and not keep[i]:
                keep[i] = True
                todo += [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    return "\n".join(ast.dump(node) for node, k in zip(tree.body, keep) if k).encode()


def fingerprint(challenge: Any, *, reference_file: Path) -> str:
    """What the frozen results depend on: the graded part of the spec (after `extends`), the reference
    entries this challenge uses (see :func:`reference_digest`), the grader's call builders and the
    recording plan; not titles, prose, points or comments, and not other challenges' reference code."""
    import validator

    root = Path(validator.__file__).parent
    spec = challenge.model_dump(mode="json")
    for key in _DOC_ONLY:
        spec.pop(key, None)
    for check in spec.get("checks", []):
        for key in _CHECK_DOC_ONLY:
            check.pop(key, None)
    h = hashlib.sha256(f"{FORMAT}|{list(RECORD_SEEDS)}|{list(RECORD_PROFILES)}|".encode())
    h.update(json.dumps(spec, sort_keys=True, default=str).encode())
    h.update(b"reference\0" + reference_digest(reference_file, challenge.entries) + b"\0")
    for path in sorted(p for pattern in _GRADER_SOURCES for p in root.glob(pattern)):
        h.update(path.name.encode() + b"\0" + _code_digest(path) + b"\0")
    return h.hexdigest()[:16]
