"""Recording the reference's results for handouts, and knowing when a recording is stale.

Recording grades the reference itself (it plays the student) for a fixed set of seeds and
profiles, through a :class:`RecordingReference`: every call that reaches the reference side is
stored under a hash of the call's plain data (tensors by dtype, shape and bytes). A student in
a handout runs the same hypothesis search on the same seed: every case a correct layer sees was
recorded, and a broken one fails on a recorded case before the search diverges. A case that was
not recorded (a shrink step, usually) is rejected, so shrinking only walks recorded cases; a
miss outside a search defers the check to official grading (see validator/reference_side.py,
which owns the file format and the replay).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

import torch

from validator.case_store import DRAWING_SOURCES
from validator.reference_side import (FORMAT, RECORD_PROFILES, RECORD_SEEDS, LiveReference, call_key,
                                      plain_result)
from validator.spec.schema import graded_part

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


class RecordingReference(LiveReference):
    """The live reference, whose results are collected by key while it is graded.

    Checks that measure the reference itself run live but are not recorded (a handout defers
    them). While a check runs, a function mode watches the results it was given: a tensor that no
    check ever reads beyond its shape and dtype (a performance check sizing its upstream gradient)
    is stored as a meta tensor, shape and dtype without data.
    """

    fork_safe = False  # what a forked grader recorded would die with it
    records = True  # checks that ask the reference more only where the student fails ask it always (see
    # validator.checks.behaviour._explained): a handout holds those results too

    def __init__(self, namespace: dict[str, Any], origin: str | None = None) -> None:
        super().__init__(namespace, origin)
        self.results: dict[str, dict] = {}
        self.active = True
        self.used: set[tuple[str, tuple]] = set()
        self._watched: dict[int, tuple[str, tuple]] = {}
        self._alive: list[torch.Tensor] = []
        self._mode = None

    def call(self, challenge_id: str, call: dict) -> dict:
        result = super().call(challenge_id, call)
        self.record(call, result)
        return result

    def record(self, call: dict, result: dict) -> None:
        if not self.active:
            return
        key = call_key(call)
        self.results.setdefault(key, plain_result(result))
        for path, t in _tensors(result):
            self._watched[id(t)] = (key, path)
            self._alive.append(t)

    def before_check(self, test: Any) -> str | None:
        self.active = not test.live_reference
        if self.active and self._mode is None:
            self._mode = _UseTracker(self._watched, self.used)
            self._mode.__enter__()
        return None

    def after_check(self, status: str, message: str) -> tuple[str, str]:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None
        self._watched.clear()
        self._alive.clear()
        self.active = True
        return status, message

    def slimmed(self) -> dict[str, dict]:
        """The results with never-read tensors reduced to their shape and dtype."""
        out = {}
        for key, result in self.results.items():
            for path, t in list(_tensors(result)):
                if (key, path) not in self.used and t.device.type != "meta" and t.numel() > 1:
                    result = _replace(result, path, torch.empty(t.shape, dtype=t.dtype, device="meta"))
            out[key] = result
        return out


# -- staleness ------------------------------------------------------------------
_GRADER_SOURCES = DRAWING_SOURCES + ("instructor/fixtures.py",)


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
    spec = graded_part(challenge)
    for entry in spec.get("entries", {}).values():
        entry.pop("adapters", None)  # how a student's tests/adapters.py is called: the reference never is
    h = hashlib.sha256(f"{FORMAT}|{list(RECORD_SEEDS)}|{list(RECORD_PROFILES)}|".encode())
    h.update(json.dumps(spec, sort_keys=True, default=str).encode())
    h.update(b"reference\0" + reference_digest(reference_file, challenge.entries) + b"\0")
    for path in sorted(p for pattern in _GRADER_SOURCES for p in root.glob(pattern)):
        h.update(path.name.encode() + b"\0" + _code_digest(path) + b"\0")
    return h.hexdigest()[:16]
