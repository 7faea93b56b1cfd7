"""Student-originated text made safe to print anywhere: the one place every reporter goes through.

A submission controls much of what a report says: exception messages, file and module names, the
submission's folder name, its answers. Printed raw, that text drives whatever displays it: a
terminal (clear the screen, rewrite a line with CR or BS, OSC-8 links, a new window title), a CI log
(GitHub's workflow commands, ``::error::``, ``::add-mask::``, ``::stop-commands::``, or the older
``##[command]`` form, are read from any line of a step's output), a spreadsheet or a web page.

:func:`visible` shows such characters instead of letting them act: control characters (C0, DEL, C1,
except newline and tab), line and paragraph separators, bidirectional overrides and lone surrogates
become escapes such as ``\\x1b`` or ``\\u202e``; a line that a GitHub runner would read as a workflow
command (``::`` after optional spaces, or ``##[`` anywhere) has its colons or hashes split by a space.
It is idempotent and leaves the grader's own text (no such characters) unchanged.
:func:`safe_report` applies it to every string of a :class:`~validator.results.Report` (:func:`safe` to any
result or plain data), :class:`SafeStream` to a log.
"""

from __future__ import annotations

import re
from dataclasses import fields, is_dataclass, replace
from typing import Any, TextIO

from validator.results import Report

# C0 but tab and newline, DEL, C1; line/paragraph separators; bidi embeddings, overrides and isolates,
# the left/right marks; a byte-order mark; lone surrogates (undecodable bytes of a student's output).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\ufeff"
                     "\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\ufeff"
                          "\ud800-\udfff]")
_COMMAND = re.compile(r"^(\s*):(?=:)", re.M)  # GitHub reads a line as a command after its leading spaces
_COMMAND_V1 = re.compile(r"#(?=#\[)")  # ...and the old form `##[name]data` anywhere in a line
# anything the substitutions below would change (the line form's set holds the other's, and a CR)
_ANY = re.compile(_UNSAFE_LINE.pattern + r"|::|##\[")


_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: Any, *, newlines: bool = True) -> str:
    """``text`` with every control character shown, never acted on, and no workflow command line.

    ``newlines=False`` shows newlines and tabs too (``\\n``, ``\\t``): for a name or a title on one line.
    A CR that ends a line (CRLF) is dropped rather than shown.
    """
    text = str(text)
    if not _ANY.search(text):
        return text  # the grader's own text, and most of a student's: nothing to show or split
    if newlines:
        text = _UNSAFE.sub(_escape, text.replace("\r\n", "\n"))
    else:
        text = _UNSAFE_LINE.sub(_escape, text)
    text = _COMMAND.sub(r"\1: ", text)
    return _COMMAND_V1.sub("# ", text)


def one_line(text: Any, limit: int | None = None) -> str:
    """``text`` shown on one line (newlines escaped), cut at ``limit`` characters with an ellipsis."""
    out = visible(text, newlines=False)
    return out if limit is None or len(out) <= limit else out[:limit - 1] + "…"


_PLAIN = (int, float, bool, type(None))  # nothing to show: numbers (a figure's hundreds of them), flags


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return visible(value)
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)):
        if type(value) in (list, tuple) and all(type(v) in _PLAIN for v in value):
            return value if type(value) is tuple else list(value)
        return type(value)(_clean(v) for v in value)
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        if getattr(value, "__dict__", {}).get(_MADE_VISIBLE):
            return value  # made visible before (a batch writes four reports of one result)
        out = replace(value, **{f.name: _clean(getattr(value, f.name)) for f in fields(value) if f.init})
        if hasattr(out, "__dict__"):
            object.__setattr__(out, _MADE_VISIBLE, True)
        return out
    return value


# Marks a result that _clean made: results are plain data that nothing changes in place (a change makes a
# copy with dataclasses.replace, which carries no mark), so cleaning it again would change nothing.
_MADE_VISIBLE = "_validator_made_visible"


def safe_report(report: Report) -> Report:
    """A copy of ``report`` with every string (messages, titles, names, notes, figures) made :func:`visible`."""
    return _clean(report)


def safe(value: Any) -> Any:
    """A copy of any result (a challenge's, a check's) or plain data (a results.json) with every string
    made :func:`visible`."""
    return _clean(value)


class SafeStream:
    """A text stream whose writes are made :func:`visible` (a log that student text may reach).

    Tracks line starts across writes, so that ``print("::error::x")`` (written as two pieces) is caught.
    """

    def __init__(self, stream: TextIO):
        self.stream = stream
        self._at_line_start = True

    def shown(self, text: str) -> str:
        """``text`` as this stream writes it (and the line state updated)."""
        if not text:
            return ""
        # Mid-line, a plain letter stands for the start of the line written before, then is cut off again.
        out = visible(text) if self._at_line_start else visible("x" + text)[1:]
        self._at_line_start = text.endswith("\n")
        return out

    def write(self, text: str) -> int:
        self.stream.write(self.shown(text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)
