"""Progress of a batch: a live bar with an ETA on a terminal, one plain line per submission elsewhere (CI).

Every line is made visible (:mod:`validator.reporters.sanitize`): a submission's folder name or a grader
failure's text cannot move the cursor, clear the terminal or issue a CI log's workflow command.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from validator.reporters.sanitize import one_line, visible


def printable(text: str, limit: int = 60) -> str:
    """A submission name made safe to print on one line: control characters shown as escapes, cut at ``limit``."""
    return one_line(text, limit)


class Progress:
    def __init__(self, total: int, *, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.live = (hasattr(self.stream, "isatty") and self.stream.isatty()) if live is None else live
        self._bar = None
        if self.live:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn,
                                       TimeElapsedColumn, TimeRemainingColumn)

            self._bar = Bar(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TextColumn("ETA"), TimeRemainingColumn(), TextColumn("{task.description}", markup=False),
                            console=Console(file=self.stream), transient=False)
            self._task = self._bar.add_task("", total=total)
            self._bar.start()

    def eta(self) -> float | None:
        if not self.done:
            return None
        rate = (time.monotonic() - self.started) / self.done
        return rate * (self.total - self.done)

    def log(self, message: str) -> None:
        message = visible(message)
        if self._bar is not None:
            self._bar.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=self.stream, flush=True)

    def advance(self, name: str, summary: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, description=f"{printable(name, 30)}: {summary}")
            return
        eta = self.eta()
        eta_text = f", eta {_clock(eta)}" if eta is not None and self.done < self.total else ""
        self.log(f"[{self.done}/{self.total}] {printable(name)}: {summary} "
                 f"(elapsed {_clock(time.monotonic() - self.started)}{eta_text})")

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
