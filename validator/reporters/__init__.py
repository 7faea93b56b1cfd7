"""Renderers of plain-data results: terminal, JSON and HTML here, batch formats beside them.

``figures`` draws the figures a check carries (an init histogram) as text for every text reporter;
``sanitize`` makes student text (exception messages, names) visible instead of acting on a terminal,
a CI log or a page, for every reporter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write a whole file or nothing: a temporary file beside it, then a rename. A reader (a gradebook
    script, a merge of shards) never sees half a report, and a failed write leaves no temporary behind."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding="utf-8")
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def readable_json(data: Any, *, flat_below: int, indent: int = 2) -> str:
    """``data`` as JSON, indented for its first ``flat_below`` levels and each value deeper than that on one
    line (a report's check, a Gradescope test): as easy to read as ``indent=2`` and a fraction of the
    lines, and written by json's C encoder rather than the pure-Python one that indenting takes (a batch
    writes two such files a submission)."""
    out: list[str] = []
    _readable(data, indent, 0, flat_below, out)
    return "".join(out)


def _readable(value: Any, indent: int, depth: int, flat_below: int, out: list[str]) -> None:
    pad = "\n" + " " * (indent * (depth + 1))
    if depth >= flat_below or not isinstance(value, (dict, list, tuple)) or not value:
        out.append(json.dumps(value, separators=(", ", ": ")))
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if not isinstance(key, str):  # as json writes a number's or a flag's key
                key = next(iter(json.loads(json.dumps({key: 0}))))
            out.append(("," if i else "") + pad + json.dumps(key) + ": ")
            _readable(item, indent, depth + 1, flat_below, out)
        out.append("\n" + " " * (indent * depth) + "}")
    else:
        out.append("[")
        for i, item in enumerate(value):
            out.append(("," if i else "") + pad)
            _readable(item, indent, depth + 1, flat_below, out)
        out.append("\n" + " " * (indent * depth) + "]")
