"""Where things live by default: the project's folders, overridable by flags and variables."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def challenges_dir() -> Path:
    return Path(os.environ.get("VALIDATOR_CHALLENGES", PROJECT_ROOT / "challenges"))


def reference_dir() -> Path:
    return Path(os.environ.get("VALIDATOR_REFERENCE", PROJECT_ROOT / "reference"))


def default_student() -> Path:
    local = Path.cwd() / "student"
    return local if (local / "layers.py").exists() else PROJECT_ROOT / "student"


def student_file(arg: str | os.PathLike | None) -> Path:
    """``--student`` takes a layers.py file or a directory holding one."""
    path = Path(arg) if arg else default_student()
    return path / "layers.py" if path.is_dir() else path


def is_handout() -> bool:
    """A student handout: no reference implementation here (it grades against frozen results)."""
    return not (reference_dir() / "layers.py").exists()
