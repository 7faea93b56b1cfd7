"""Renderers of plain-data results: terminal, JSON and HTML here, batch formats beside them.

``figures`` draws the figures a check carries (an init histogram) as text for every text reporter;
``sanitize`` makes student text (exception messages, names) visible instead of acting on a terminal,
a CI log or a page, for every reporter.
"""

from __future__ import annotations

import os
from pathlib import Path


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
