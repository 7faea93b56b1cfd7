"""Reading what a submission hands the grader: its files and its answers, with fixed bounds.

Every file a submission provides is opened without following links
(``O_NOFOLLOW``), must be a regular file (checked with ``fstat`` on the open
descriptor, so it cannot be swapped between check and read), and its size is
counted on the bytes actually read: a ``/proc`` file reports size 0 but has
content, so ``stat`` is never trusted. Reading stops one byte past the cap.

Answers are plain data: ``challenge_id: {question_id: answer}``. Before YAML
sees them they must be at most :data:`MAX_ANSWERS_BYTES` and nest at most
:data:`MAX_ANSWERS_DEPTH` flow brackets; the YAML events are then walked with
the same depth limit, and only then composed. Parsing so costs time linear in
the (capped) size whatever the content, and never recurses deeply.

Bounds (also in ``docs/batch.md``):

- ``layers.py`` and each helper module: at most :data:`MAX_SOURCE_BYTES` (1 MiB);
- a student's own package (:mod:`validator.package`): its Python files as above, at most
  200 and 16 MiB in all; its other files at most 1 MiB each, 200 and 8 MiB in all (more are
  left out with a note, never a reason not to grade);
- ``answers.yaml``: at most :data:`MAX_ANSWERS_BYTES` (64 KiB), nesting depth at most
  :data:`MAX_ANSWERS_DEPTH`, no aliases.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

MAX_SOURCE_BYTES = 1 << 20
MAX_ANSWERS_BYTES = 64 << 10
MAX_ANSWERS_DEPTH = 8


class IntakeError(Exception):
    """A file or answer set the grader refuses; the message says which file and why."""


def read_submission_file(path: str | os.PathLike, *, cap: int, what: str | None = None) -> bytes:
    """The bytes of ``path``, a regular file that is not a link, if it holds at most ``cap`` bytes.

    Raises :class:`IntakeError` for a link, anything but a regular file, a file
    that cannot be opened, or one larger than ``cap``. The message names the file
    (``what``, or the file name) and never quotes what a link points at.
    """
    name = what or Path(path).name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise IntakeError(f"{name}: no such file in the submission") from None
    except OSError as exc:
        if os.path.islink(path):
            raise IntakeError(f"{name} is a symbolic link, which is not graded: submit the file itself") from None
        raise IntakeError(f"{name} cannot be opened ({exc.strerror})") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
            raise IntakeError(f"{name} is {kind}, which is not graded: submit a plain file")
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as exc:
        raise IntakeError(f"{name} cannot be read ({exc.strerror})") from None
    finally:
        os.close(fd)
    if total > cap:
        raise IntakeError(f"{name} is larger than {size_label(cap)}, the limit for a submitted file: not graded")
    return b"".join(chunks)


def size_label(n: int) -> str:
    """A byte count as the limits are written: "1 MiB", "64 KiB"."""
    return f"{n >> 20} MiB" if n >= 1 << 20 and not n % (1 << 20) else f"{n >> 10} KiB"


def flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow brackets (``[``/``{``) outside quotes and comments.

    A linear scan: the YAML scanner itself is quadratic in this depth (30,000
    ``[`` took minutes), so it is measured before the text reaches YAML.
    """
    depth = deepest = 0
    quote = ""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"" and (i == 0 or text[i - 1] in " \t\n[{,:-?"):
            quote = c
        elif c == "#" and (i == 0 or text[i - 1] in " \t\n"):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest


def parse_answers(text: str, *, where: str = "answers.yaml") -> dict[str, dict[str, Any]]:
    """``challenge_id -> {question_id -> answer}`` from YAML text, in bounded time and memory.

    Refused with :class:`IntakeError` (message naming ``where``): more than
    :data:`MAX_ANSWERS_BYTES`, deeper than :data:`MAX_ANSWERS_DEPTH`, aliases,
    invalid YAML, or any other top-level shape.
    """
    import yaml

    if len(text.encode("utf-8", "surrogatepass")) > MAX_ANSWERS_BYTES:
        raise IntakeError(f"{where} is larger than {size_label(MAX_ANSWERS_BYTES)}, the limit for answers: ignored")
    if flow_depth(text) > MAX_ANSWERS_DEPTH:
        raise _too_deep(where)
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise IntakeError(f"{where}: YAML aliases (*name) are not allowed")
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_ANSWERS_DEPTH:
                    raise _too_deep(where)
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise IntakeError(f"{where}{line}: invalid YAML: {getattr(exc, 'problem', None) or exc}") from None
    except (RecursionError, MemoryError, ValueError, OverflowError) as exc:
        raise IntakeError(f"{where}: cannot be read as answers ({type(exc).__name__})") from None
    if not isinstance(data, dict) or not all(isinstance(v, (dict, type(None))) for v in data.values()):
        raise IntakeError(f"{where}: expected `challenge_id: {{question_id: answer}}` mappings")
    return {str(k): dict(v or {}) for k, v in data.items()}


def _too_deep(where: str) -> IntakeError:
    return IntakeError(f"{where}: nested more than {MAX_ANSWERS_DEPTH} levels deep; answers are "
                       "`challenge_id: {question_id: answer}` with single-value answers")


def read_answers(path: str | os.PathLike, *, where: str | None = None) -> dict[str, dict[str, Any]]:
    """A submission's answers file: :func:`read_submission_file` then :func:`parse_answers`."""
    where = where or str(path)
    raw = read_submission_file(path, cap=MAX_ANSWERS_BYTES, what=where)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise IntakeError(f"{where} is not UTF-8 text") from None
    return parse_answers(text, where=where)
