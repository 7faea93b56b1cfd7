"""Recorded cases: what each check was given when the reference passed it, kept on disk, so that a fresh
grader replays them instead of drawing them again under hypothesis.

A check's cases depend on the graded spec, the check, the seed, the settings and the grader's code alone
(see :func:`validator.checks.for_all`), so every layer that passes a check is given the same ones. A
grader remembers them in memory after a pass; ``validator regenerate`` also writes the cases the
reference was given, for the profiles and seeds in :data:`RECORDED`, to
``challenges/fixtures/<id>.cases``. A grader that loads the file starts with those cases remembered: a
first run in a new process (a student's ``submit-build``, a Gradescope container) skips hypothesis's
search for every check the layer passes. A replayed case that does not simply pass still makes the
check run again under hypothesis, so failures are found and shrunk as before.

The file is stamped with a digest of the code that draws cases (:data:`DRAWING_SOURCES`, byte for
byte) and the versions of hypothesis and torch. A grader whose stamp differs ignores the file and draws
as before, so a stale file costs time, never a verdict; ``regenerate --check`` reports it stale. It is
the worker's wire format (plain tensors from bytes, nothing unpickled): the stamp, and one section per
recorded run (:func:`section`), each compressed on its own so that a grader decompresses only its own.
It holds drawn inputs only: nothing in it is an answer.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

import torch

from validator.cases import Case
from validator.draws import tensor_nbytes
from validator.reference_side import (OFFICIAL_SEED, RECORD_SEEDS, decode, decoded_once, encode, strings_in, unpack,
                                      versions)
from validator.worker.protocol import pack, tensor_bytes

SUFFIX = ".cases"
FORMAT = 1
# The code that decides which cases a check draws, relative to the package (all of it ships in a handout).
DRAWING_SOURCES = ("cases.py", "case_store.py", "context.py", "runner.py", "profiles.py", "spec/schema.py",
                   "worker/protocol.py", "checks/*.py", "reference_side.py")
# What regenerate records: submit-build's profile with every seed it picks from, and official grading's run.
RECORDED = {"default": RECORD_SEEDS, "batch": (OFFICIAL_SEED,)}
# A check whose cases hold more tensor bytes than this is left to be drawn: a few large tensors are drawn in
# no time, and would make every handout larger and every load slower.
MAX_CHECK_BYTES = 64 << 10
_CASE_FIELDS = ("dims", "inputs", "seed", "notes")


def cases_path(challenges_dir: Path, challenge_id: str) -> Path:
    return Path(challenges_dir) / "fixtures" / f"{challenge_id}{SUFFIX}"


@lru_cache(maxsize=1)
def stamp() -> dict[str, str]:
    """What recorded cases are valid for: the drawing code's bytes and the libraries that draw."""
    import validator

    root = Path(validator.__file__).parent
    h = hashlib.sha256()
    for path in sorted({p for pattern in DRAWING_SOURCES for p in root.glob(pattern)}):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return {"format": str(FORMAT), "code": h.hexdigest()[:24], **versions()}


# -- a Case as plain data ---------------------------------------------------------------------------
def to_plain(case: Case) -> dict:
    """A case as wire data: its fields, any attributes a check attached (``layouts``, ``extra``), and the
    later calls of a sequence (``steps``, whose first is the case itself)."""
    extra = {k: v for k, v in vars(case).items() if k not in _CASE_FIELDS}
    steps = extra.pop("steps", None)
    out = {"dims": case.dims, "inputs": case.inputs, "seed": case.seed, "notes": case.notes, "attrs": extra}
    if steps is not None:
        if not steps or steps[0] is not case:
            raise ValueError("a sequence whose first step is not the case itself")
        out["steps"] = [to_plain(s) for s in steps[1:]]
    return out


def from_plain(data: dict) -> Case:
    case = Case(dims=data["dims"], inputs=data["inputs"], seed=data["seed"], notes=data["notes"])
    for name, value in data.get("attrs", {}).items():
        setattr(case, name, value)
    if "steps" in data:
        case.steps = [case] + [from_plain(s) for s in data["steps"]]
    return case


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (a tuple is not a list; a tensor keeps dtype, shape,
    strides and every bit): what a replayed case must be to stand for the drawn one."""
    if type(a) is not type(b):
        return False
    if isinstance(a, torch.Tensor):
        return (a.dtype == b.dtype and a.shape == b.shape and a.stride() == b.stride()
                and a.requires_grad == b.requires_grad and a.device == b.device
                and (a.numel() == 0 or torch.equal(_bits(a), _bits(b))))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, Case):
        return same(to_plain(a), to_plain(b))
    return a == b or (a != a and b != b)  # NaN stands for NaN


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.detach().reshape(-1).view(torch.uint8) if t.dtype != torch.bool else t.detach().reshape(-1)


# -- the file ---------------------------------------------------------------------------------------------
def section(profile: str, seed: int) -> str:
    """The name of one run's cases in a file: a grader reads only the section of its own profile and seed."""
    return f"{profile}-{seed}"


def to_bytes(sections: dict[str, dict[tuple, list]], *, seconds: float | None = None) -> tuple[bytes, list[tuple]]:
    """The file for ``sections`` (:func:`section` name -> replay key -> cases), and the keys left out, to be
    drawn again: those whose cases do not come back from the wire format exactly as they were drawn, and
    those over :data:`MAX_CHECK_BYTES`. Each section is compressed on its own, so a grader decompresses its
    own run's only. ``seconds``: what grading the challenge took when it was recorded (see :func:`seconds`)."""
    packed, left_out = {}, []
    for name in sorted(sections):
        entries = sections[name]
        kept = []
        for key in sorted(entries, key=repr):
            try:
                plain = [to_plain(c) for c in entries[key]]
            except (AttributeError, ValueError):
                left_out.append(key)
                continue
            if tensor_nbytes(plain) > MAX_CHECK_BYTES:
                left_out.append(key)
                continue
            back = unpack(pack({"cases": plain}))["cases"]
            if all(same(c, from_plain(b)) for c, b in zip(entries[key], back)):
                kept.append([list(key), plain])
            else:
                left_out.append(key)
        packed[name] = torch.frombuffer(bytearray(encode({"entries": kept})), dtype=torch.uint8)
    header = {"stamp": stamp(), "sections": packed}
    if seconds is not None:
        header["seconds"] = round(float(seconds), 2)
    return pack(header), left_out


_READ: dict[str, tuple[tuple[int, int], dict]] = {}


def _header(path: Path) -> dict:
    """The file's outer message (stamp, seconds, compressed sections), read once while the file is unchanged."""
    return decoded_once(Path(path), lambda p: unpack(p.read_bytes()), _READ)


def _sections(path: Path) -> tuple[dict, dict]:
    data = _header(path)
    return data.get("stamp"), data.get("sections") or {}


def seconds(challenges_dir: Path, challenge_id: str) -> float | None:
    """What grading the challenge took when its cases were recorded (the reference, one grader): how
    parallel graders share a run (validator.parallel). None where nothing was recorded."""
    try:
        value = _header(cases_path(challenges_dir, challenge_id)).get("seconds")
    except Exception:  # noqa: BLE001 - no file, or not one this validator reads
        return None
    return float(value) if isinstance(value, (int, float)) and value >= 0 else None


def read(path: Path, name: str) -> dict[tuple, list] | None:
    """One section's entries, or None where the file or the section is missing or unreadable, or the file
    was stamped by other code."""
    try:
        stamped, sections = _sections(path)
        if stamped != stamp() or name not in sections:
            return None
        data = decode(_blob(sections[name]))
        return {_key(raw): [from_plain(c) for c in cases] for raw, cases in data["entries"]}
    except Exception:  # noqa: BLE001 - a damaged or foreign file only means drawing the cases again
        return None


def read_stamp(path: Path) -> dict | None:
    try:
        return _sections(path)[0]
    except Exception:  # noqa: BLE001
        return None


def strings(path: Path) -> list[str] | None:
    """Every string a cases file holds (its notes, its keys' check names), for a leak search; None where the
    file is not one this validator reads."""
    try:
        stamped, sections = _sections(path)
        return strings_in(stamped) + [s for name, blob in sections.items()
                                      for s in [name, *strings_in(decode(_blob(blob)))]]
    except Exception:  # noqa: BLE001
        return None


def _blob(value: Any) -> bytes:
    if not isinstance(value, torch.Tensor) or value.dtype != torch.uint8:
        raise ValueError("a section that is not a byte string")
    return tensor_bytes(value)


def _key(raw: list) -> tuple:
    return tuple(tuple(k) if isinstance(k, list) else k for k in raw)


_LOADED: dict[str, dict] = {}  # section name -> the cache of decoded_once for that section of each file


def load(challenges_dir: Path, challenge_id: str, *, profile: str, seed: int) -> int:
    """Remember the recorded cases of one challenge's run with ``profile`` and ``seed`` in this process (the
    section is decoded once per file while the file is unchanged); returns how many checks' cases it holds."""
    from validator.checks import remember_cases

    path = cases_path(challenges_dir, challenge_id)
    name = section(profile, seed)
    try:
        entries = decoded_once(path, lambda p: read(p, name), _LOADED.setdefault(name, {}))
    except OSError:
        return 0
    if not entries:
        return 0
    remember_cases(entries)
    return len(entries)
