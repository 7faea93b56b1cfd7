"""The reference side of a run: one small interface, three implementations, chosen once per run.

A check asks the reference for the result of a call (``ReferenceSide.call``); where that
result comes from is the side's business:

- ``LiveReference`` runs reference/layers.py in-process (repository, batch grading);
- ``FrozenReference`` replays results recorded by ``validator regenerate`` (a student handout);
- ``validator.instructor.fixtures.RecordingReference`` runs the reference live and records
  what it returns, to write those fixtures.

Around each check the engine asks the side whether the check can run here (``before_check``)
and lets it amend the verdict (``after_check``): a frozen side defers a check that measures the
reference itself, and one whose every input missed the recording. The fixture file format lives
here too, because replaying it is part of grading; recording and staleness are instructor tools.

Files: ``challenges/fixtures/<id>.frozen``, an xz-compressed message in the worker's wire format
(a JSON header plus raw tensor bytes). Loading one builds plain tensors from bytes and never
unpickles anything.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Protocol, TypeVar

import torch

from validator.context import ReferenceUnavailable
from validator.draws import copied
from validator.runner import execute
from validator.worker.protocol import (ProtocolError, _count_tensors, _decode, dtype_name, pack, plain_tensor,
                                       tensor_bytes, values_view)

FORMAT = 1
SUFFIX = ".frozen"
KEY_HEX = 24  # 96 bits of sha256: no collision in any realistic catalogue
RECORD_SEEDS = (11, 23, 47)
# `batch` is official grading's profile (derandomized, no shrinking): recorded, so that the reproduce line
# of official feedback (`--seed OFFICIAL_SEED --profile batch`) replays in a handout, input for input.
RECORD_PROFILES = ("quick", "default", "batch")
OFFICIAL_SEED = RECORD_SEEDS[0]  # `validator grade` and the autograder bundle grade with a seed handouts hold
DEFERRED = "deferred to official grading"


def fixture_path(challenges_dir: Path, challenge_id: str) -> Path:
    return Path(challenges_dir) / "fixtures" / f"{challenge_id}{SUFFIX}"


# -- the key --------------------------------------------------------------------
def _feed(out: list, obj: Any) -> None:
    """Append ``obj``'s bytes for the key to ``out``: the walk :func:`call_key` falls back on."""
    if isinstance(obj, str):
        out.append(f"s{obj!r}|".encode())
    elif isinstance(obj, torch.Tensor):
        t = obj.detach()
        out.append(f"T{dtype_name(t.dtype)}{list(t.shape)}{t.device.type}|".encode())
        if t.device.type != "meta" and t.numel():
            out.append(tensor_bytes(t))
    elif isinstance(obj, dict):
        out.append(f"D{len(obj)}|".encode())
        for k in sorted(obj, key=str):
            _feed(out, str(k))
            _feed(out, obj[k])
    elif isinstance(obj, (list, tuple)):
        out.append(f"L{len(obj)}|".encode())
        for v in obj:
            _feed(out, v)
    elif isinstance(obj, torch.dtype):
        out.append(f"y{dtype_name(obj)}|".encode())
    elif obj is None or isinstance(obj, (bool, int, float)):
        out.append(f"{type(obj).__name__[0]}{obj!r}|".encode())
    else:
        out.append(f"?{type(obj).__name__}:{obj!r}|".encode())


def _update_with_values(digest: Any, t: torch.Tensor) -> None:
    """Hash a tensor's values in row-major order (:func:`~validator.worker.protocol.plain_tensor`'s memory)."""
    if t.device.type == "meta" or not t.numel():
        digest.update(b"|0|")
        return
    plain = plain_tensor(t)
    n = plain.numel() * plain.element_size()
    digest.update(b"|%d|" % n)
    digest.update(values_view(plain))  # hashed at once, while ``plain`` holds the memory


def call_key(call: dict) -> str:
    """A stable hash of a call's plain data: equal calls, equal keys, across processes and machines.

    The structure is written by JSON's C encoder, keys sorted, each tensor as its dtype, shape and device and
    each dtype as its name; those objects are also counted, and each tensor's values hashed, after the text, so
    that a list or string that only looks like such a description is told apart (it adds nothing there). What
    JSON cannot write (dict keys of mixed types) is walked instead (:func:`_feed`), in a domain of its own.
    ~600 keys a submission of a batch; the walk alone took ~35 us a key, the encoder ~10."""
    plain = {k: v for k, v in call.items() if not str(k).startswith("_")}  # _keys are the grader's notes
    objects: list = []

    def describe(obj: Any) -> Any:
        objects.append(obj)
        if isinstance(obj, torch.Tensor):
            return [dtype_name(obj.dtype), list(obj.shape), obj.device.type]
        if isinstance(obj, torch.dtype):
            return dtype_name(obj)
        return f"{type(obj).__name__}:{obj!r}"

    try:
        text = json.dumps(plain, sort_keys=True, default=describe, separators=(",", ":"))
    except (TypeError, ValueError):
        parts: list = [b"W"]
        _feed(parts, plain)
        return hashlib.sha256(b"".join(parts)).hexdigest()[:KEY_HEX]
    digest = hashlib.sha256(b"J" + text.encode() + b"|%d" % len(objects))
    for obj in objects:
        if isinstance(obj, torch.Tensor):
            _update_with_values(digest, obj.detach())
    return digest.hexdigest()[:KEY_HEX]


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
    return unpack(lzma.decompress(blob))


def unpack(raw: bytes) -> dict:
    """The message :func:`~validator.worker.protocol.pack` made of ``raw`` (no compression)."""
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


# -- the interface --------------------------------------------------------------------
class ReferenceSide(Protocol):
    """Where a run's reference results come from: live, recording (instructor tools) or frozen.

    ``fork_safe`` says whether graders forked from this process may share it: a side that keeps
    what it learns in this process's memory (a recording) is not, and grading then stays serial.
    ``fastest`` is where a speed check keeps the reference's fastest timed run per measurement, across
    the submissions this process grades (a batch slot), or None where a run grades one submission;
    ``output_sizes`` where a measured run keeps the shape and dtype of the reference's output for the call
    it drew (its upstream gradient is drawn to match), likewise.
    """

    fork_safe: bool
    fastest: dict[tuple, float] | None
    output_sizes: dict[tuple, tuple[tuple[int, ...], torch.dtype]] | None

    def call(self, challenge_id: str, call: dict) -> dict:
        """The reference's result for ``call`` (``{"ok": False, ...}`` if it raised, as the worker says)."""

    def before_check(self, test: Any) -> str | None:
        """Get ready for one check of test ``test``; a returned reason means: skip it, deferred."""

    def after_check(self, status: str, message: str) -> tuple[str, str]:
        """The check has run: the verdict, possibly amended (nothing compared is no pass)."""


class LiveReference:
    """The reference module, run in-process (it is trusted instructor code)."""

    fork_safe = True
    fastest = output_sizes = None

    def __init__(self, namespace: dict[str, Any], origin: str | None = None):
        self.namespace = namespace
        self.origin = origin

    @classmethod
    def from_file(cls, path: Path, **kwargs: Any):
        """Import reference/layers.py (trusted instructor code) under a private module name."""
        import importlib.util
        import sys

        spec = importlib.util.spec_from_file_location("validator_reference_layers", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return cls(vars(module), origin=str(path), **kwargs)

    def call(self, challenge_id: str, call: dict) -> dict:
        return execute(self.namespace, call, origin=self.origin)

    def before_check(self, test: Any) -> str | None:
        return None

    def after_check(self, status: str, message: str) -> tuple[str, str]:
        return status, message


class RememberingReference:
    """A live reference that answers a call it has answered before from memory.

    A batch slot grades every submission on the same seed, so each asks the reference the same questions
    (~770 calls for the catalogue, a tenth of a correct submission's grading). Results are kept by call
    content (:func:`call_key`) and handed out as copies: a check may not change what the next submission is
    compared with. A timed run (a call with ``repeat``, in a check that measures the reference itself:
    ``live_reference``) always runs: its time is the answer; the same check's other calls (the values a
    measured run is compared with) are remembered like any other. The speed check keeps the reference's
    fastest time per measurement in ``fastest``. At ``max_entries`` the memory starts over, so seeds that
    vary per submission cost only the time saved.
    """

    fork_safe = True

    def __init__(self, live: LiveReference, *, max_entries: int = 20_000):
        self.live = live
        self.max_entries = max_entries
        self.known: dict[tuple[str, str], dict] = {}
        self.fastest: dict[tuple, float] = {}
        self.output_sizes: dict[tuple, tuple[tuple[int, ...], torch.dtype]] = {}
        self.measuring = False
        self.hits = self.misses = 0

    def call(self, challenge_id: str, call: dict) -> dict:
        if self.measuring and "repeat" in call:
            return self.live.call(challenge_id, call)
        key = (challenge_id, call_key(call))
        found = self.known.get(key)
        if found is None:
            self.misses += 1
            found = self.live.call(challenge_id, call)
            if len(self.known) >= self.max_entries:
                self.known.clear()
            self.known[key] = found
        else:
            self.hits += 1
        return copied(found)

    def before_check(self, test: Any) -> str | None:
        self.measuring = bool(test.live_reference)
        return self.live.before_check(test)

    def after_check(self, status: str, message: str) -> tuple[str, str]:
        return self.live.after_check(status, message)


# -- files decoded once, and the strings they hold --------------------------------------------
T = TypeVar("T")


def decoded_once(path: Path, decode: Callable[[Path], T], cache: dict[str, tuple[tuple[int, int], T]]) -> T:
    """``decode(path)``, computed once per process while the file's mtime and size are unchanged.

    A handout's run reads each fixture twice (which seeds it may use, then the results to grade with) and
    a batch slot reads each cases file once per submission; decoding the catalogue's fixtures costs 0.4 s.
    ``cache`` keeps one entry per path, so a long-lived process (a watch) holds only each file's latest
    version."""
    stat = path.stat()
    key, version = str(path.resolve()), (stat.st_mtime_ns, stat.st_size)
    known = cache.get(key)
    if known is None or known[0] != version:
        known = cache[key] = (version, decode(path))
    return known[1]


def strings_in(obj: Any, *, key: Callable[[str], bool] = lambda k: True) -> list[str]:
    """Every string in decoded data (dict keys for which ``key`` holds, and values), for a leak search."""
    found: list[str] = []
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            found.extend(str(k) for k in item if key(str(k)))
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return found


# -- replay -----------------------------------------------------------------------------
_READ: dict[str, tuple[tuple[int, int], FixtureFile]] = {}  # path -> ((mtime, size), the file as last decoded)


class FrozenReference:
    """Answers reference calls from fixture files; counts hits and misses per check."""

    fork_safe = True
    fastest = output_sizes = None

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
                files[cid] = decoded_once(path, FixtureFile.read, _READ)
        return cls(files)

    def seeds(self, challenge_ids: Iterable[str]) -> list[int]:
        sets = [set(self.files[c].seeds) for c in challenge_ids if c in self.files]
        return sorted(set.intersection(*sets)) if sets else []

    def profiles(self, challenge_ids: Iterable[str]) -> list[str]:
        sets = [set(self.files[c].profiles) for c in challenge_ids if c in self.files]
        return [p for p in RECORD_PROFILES if all(p in s for s in sets)] if sets else []

    def before_check(self, test: Any) -> str | None:
        self.hits = self.misses = 0
        if test.live_reference:
            return (f"{DEFERRED}: this check measures the reference implementation itself, which a handout "
                    "does not include")
        return None

    def after_check(self, status: str, message: str) -> tuple[str, str]:
        # Nothing was compared: a pass (or an error of the grader's making) would claim what was never checked.
        if status in ("passed", "error") and self.misses and not self.hits:
            return "skipped", (f"{DEFERRED}: none of the generated inputs has a frozen reference result "
                               "(were the fixtures recorded with another hypothesis version?)")
        return status, message

    def call(self, challenge_id: str, call: dict) -> dict:
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
