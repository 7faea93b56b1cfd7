"""Find the submissions in a folder and pick a shard's share of them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from validator.api import UsageError
from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file

MAX_HELPER_FILES = 20


@dataclass(frozen=True)
class Submission:
    name: str  # the folder's name: the key of every output file
    folder: Path

    @property
    def layers(self) -> Path:
        return self.folder / "layers.py"

    @property
    def answers(self) -> Path:
        return self.folder / "answers.yaml"

    @property
    def is_package(self) -> bool:
        """The student's own package, graded through the [tool.validator] mapping of its pyproject.toml."""
        from validator.package import is_package_root

        return is_package_root(self.folder)

    @property
    def notebooks(self) -> list[Path]:
        """The notebooks graded in place when the folder holds no layers.py (validator/notebook.py)."""
        from validator.notebook import notebooks_in

        return notebooks_in(self.folder)

    def files(self) -> dict[str, str]:
        """What is copied into the worker's scratch dir: layers.py and a few small helper modules."""
        return self.intake()[0]

    def intake(self) -> tuple[dict[str, str], list[str]]:
        """The files to copy in, and why the submission cannot be graded (empty when it can).

        Each file is read as the worker's copy-in reads it (:func:`validator.intake.read_submission_file`:
        no links, regular files only, at most ``MAX_SOURCE_BYTES``); a refused ``layers.py`` or
        helper module fails the submission before anything parses it.
        """
        found: dict[str, str] = {}
        problems: list[str] = []
        helpers = sorted(p for p in self.folder.glob("*.py") if p.name != "layers.py")
        for p in [self.layers, *helpers[:MAX_HELPER_FILES]]:
            if p.name != "layers.py" and p.is_symlink():
                continue  # a linked helper is not copied in: importing it fails in the worker, with its name
            try:
                read_submission_file(p, cap=MAX_SOURCE_BYTES)
            except IntakeError as exc:
                if os.path.lexists(p):
                    problems.append(str(exc))
                continue
            found[p.name] = str(p)
        return found, problems


def discover(root: str | Path) -> list[Submission]:
    """One submission per sub-folder of ``root`` (hidden folders skipped), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise UsageError(f"{root} is not a folder of submissions")
    subs = [Submission(p.name, p) for p in sorted(root.iterdir(), key=lambda p: p.name)
            if p.is_dir() and not p.name.startswith(".")]
    clashes = [s.name for s in subs if s.name in BATCH_OUTPUTS or s.name.startswith("dashboard-")]
    if clashes:
        raise UsageError(f"{', '.join(str(root / n) for n in clashes)}: a submission's report is written as "
                         f"NAME.json beside the batch's own {', '.join(f'{n}.json' for n in BATCH_OUTPUTS)} "
                         "(and dashboard-*.json), so it would overwrite one of them: rename the folder")
    return subs


BATCH_OUTPUTS = ("dashboard", "compare", "run")  # out/NAME.json files a batch writes beside the reports


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based
    count: int

    @property
    def label(self) -> str:
        return f"{self.index}-of-{self.count}"

    def select(self, subs: list[Submission]) -> list[Submission]:
        """Every count-th submission in name order, starting at index: shards are disjoint and cover all."""
        return subs[self.index - 1::self.count]


def parse_shard(text: str | None) -> Shard:
    """``I/N`` with 1 <= I <= N (as in a job array numbered from 1); none means the whole batch."""
    if not text:
        return Shard(1, 1)
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match:
        raise UsageError(f"--shard takes I/N, e.g. 2/8, got {text!r}")
    index, count = int(match.group(1)), int(match.group(2))
    if not 1 <= index <= count:
        raise UsageError(f"--shard {text}: I must be between 1 and N (shards are numbered from 1)")
    return Shard(index, count)
