"""Plain-data results: what every check, challenge and submission produces.

Reporters (terminal, JSON, JUnit, Gradescope) render these; nothing here knows
how it will be displayed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

KINDS = ("shape", "values", "ids", "gradient", "init", "structure",
         "constraint", "performance", "question")
STATUSES = ("passed", "failed", "error", "skipped", "advisory")


@dataclass
class Histogram:
    """A sample's histogram beside the share an expected distribution puts in each bin.

    ``counts[i]`` values fell in ``[edges[i], edges[i+1])`` (the last bin is closed); ``below`` and
    ``above`` count values outside ``[edges[0], edges[-1]]``. ``expected`` is the probability the
    expected distribution gives each bin, ``expected_below`` / ``expected_above`` outside them.
    ``bounds`` is that distribution's support where it is finite (a truncation or a uniform's ends),
    and ``on_bounds`` how many values sit exactly on each bound: a continuous sampler puts almost
    none there, clamping puts a spike.
    """

    title: str
    edges: list[float]
    counts: list[int]
    expected: list[float]
    below: int = 0
    above: int = 0
    expected_below: float = 0.0
    expected_above: float = 0.0
    expected_label: str = ""
    bounds: list[float] | None = None
    on_bounds: list[int] | None = None
    notes: list[str] = field(default_factory=list)
    kind: str = "histogram"

    @property
    def n(self) -> int:
        return sum(self.counts) + self.below + self.above

    @staticmethod
    def from_dict(data: dict[str, Any]) -> "Histogram":
        bounds = data.get("bounds")
        return Histogram(title=str(data.get("title", "")), edges=[float(x) for x in data.get("edges", [])],
                         counts=[int(x) for x in data.get("counts", [])],
                         expected=[float(x) for x in data.get("expected", [])],
                         below=int(data.get("below", 0)), above=int(data.get("above", 0)),
                         expected_below=float(data.get("expected_below", 0.0)),
                         expected_above=float(data.get("expected_above", 0.0)),
                         expected_label=str(data.get("expected_label", "")),
                         bounds=None if bounds is None else [float(x) for x in bounds],
                         on_bounds=None if data.get("on_bounds") is None else [int(x) for x in data["on_bounds"]],
                         notes=[str(x) for x in data.get("notes", [])])


def figure_from_dict(data: dict[str, Any]) -> Histogram | None:
    """A figure read back from JSON; None for a kind this version does not know (newer writer)."""
    if isinstance(data, dict) and data.get("kind", "histogram") == "histogram":
        return Histogram.from_dict(data)
    return None


_FIELDS: dict[type, tuple[str, ...]] = {}
_SCALAR = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """What ``dataclasses.asdict`` makes of a result (fresh dicts and lists all the way down), without its
    deep copy of every value: a report's figures hold thousands of numbers, and a batch writes four
    reports a submission."""
    kind = type(value)
    if kind in _SCALAR:
        return value
    if kind is list:
        return [v if type(v) in _SCALAR else _plain(v) for v in value]
    if kind is dict:
        return {k: _plain(v) for k, v in value.items()}
    if kind is tuple:
        return tuple(_plain(v) for v in value)
    if is_dataclass(value) and not isinstance(value, type):
        names = _FIELDS.get(kind)
        if names is None:
            names = _FIELDS[kind] = tuple(f.name for f in fields(value))
        return {name: _plain(getattr(value, name)) for name in names}
    return value


@dataclass
class CheckResult:
    id: str
    kind: str
    status: str
    score: float
    max_score: float
    message: str = ""
    title: str = ""
    reproduce: str | None = None
    explanation: str | None = None
    # A question answered wrong: the right answer, shown or withheld by the answer policy (validator.questions).
    answer: str | None = None
    duration_s: float = 0.0
    # Why a person should look at this submission (evidence of evading the grader); empty when none.
    review: list[str] = field(default_factory=list)
    # Pictures of what the check observed (an init check's histogram), as data; reporters draw them.
    figures: list[Histogram] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status in ("passed", "advisory") or (
            self.status == "skipped" and self.max_score == 0)

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)


@dataclass
class ChallengeResult:
    id: str
    title: str
    checks: list[CheckResult] = field(default_factory=list)
    problem: str | None = None  # a message that concerns the whole challenge (import error, ...)
    # A student's package graded in place: entry -> "module:attr (file)" that implements it; empty for layers.py.
    implementations: dict[str, str] = field(default_factory=dict)

    @property
    def score(self) -> float:
        return round(sum(c.score for c in self.checks), 6)

    @property
    def max_score(self) -> float:
        return round(sum(c.max_score for c in self.checks), 6)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def review(self) -> list[str]:
        """``check: reason`` for every reason a check gave to have a person review the submission."""
        return [f"{c.id}: {r}" for c in self.checks for r in c.review]

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "title": self.title, "score": self.score,
               "max_score": self.max_score, "problem": self.problem, "review": self.review,
               "checks": [c.to_dict() for c in self.checks]}
        if self.implementations:  # only for a package graded in place
            out["implementations"] = dict(self.implementations)
        return out


@dataclass
class Report:
    challenges: list[ChallengeResult]
    seed: int
    student: str
    profile: str
    duration_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return round(sum(c.score for c in self.challenges), 6)

    @property
    def max_score(self) -> float:
        return round(sum(c.max_score for c in self.challenges), 6)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.challenges)

    @property
    def review(self) -> list[str]:
        """``challenge/check: reason`` for every reason to have a person review this submission."""
        return [f"{c.id}/{r}" for c in self.challenges for r in c.review]

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.score, "max_score": self.max_score,
                "seed": self.seed, "student": self.student,
                "profile": self.profile, "duration_s": round(self.duration_s, 3),
                "notes": list(self.notes), "review": self.review,
                "challenges": [c.to_dict() for c in self.challenges]}
