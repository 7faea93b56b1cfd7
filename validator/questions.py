"""Conceptual questions: load answers, ask missing ones at a terminal, grade against the key."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

import yaml

from validator.results import CheckResult
from validator.spec.schema import Challenge, Question


class AnswersError(Exception):
    """The answers file cannot be read; the message says where and why."""


def load_answers(path: Path | None) -> dict[str, dict[str, Any]]:
    if path is None or not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise AnswersError(f"{path}{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or not all(isinstance(v, (dict, type(None))) for v in data.values()):
        raise AnswersError(f"{path}: expected `challenge_id: {{question_id: answer}}` mappings")
    return {k: dict(v or {}) for k, v in data.items()}


def load_key(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    if not path.exists():
        return {}
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def ask(challenge: Challenge, question: Question, read: Callable[[str], str] = input,
        out: TextIO = sys.stdout) -> Any:
    """Prompt for one answer at the terminal; empty input leaves it unanswered."""
    out.write(f"\n[{challenge.id}] {question.prompt.strip()}\n")
    if question.type == "choice":
        for letter, text in question.choices.items():
            out.write(f"  {letter}) {text}\n")
    unit = f" ({question.unit})" if question.unit else ""
    raw = read(f"your answer{unit}: ").strip()
    return raw or None


def _title(prompt: str, limit: int = 120) -> str:
    """The prompt's start as a title, cut at a word boundary (with an ellipsis) when it is long."""
    text = " ".join(prompt.split())
    if len(text) <= limit:
        return text
    return text[:limit - 1].rsplit(" ", 1)[0].rstrip(",;:") + "…"


def grade_question(question: Question, answer: Any, key: dict[str, Any] | None) -> CheckResult:
    base = dict(id=f"question_{question.id}", kind="question", max_score=question.points,
                title=_title(question.prompt))
    if key is None:
        return CheckResult(status="skipped", score=0.0, message="recorded; graded at official submission"
                           if not is_missing(answer) else "not answered", **base)
    explanation = key.get("explanation")
    if is_missing(answer):
        return CheckResult(status="failed", score=0.0, explanation=explanation,
                           message="not answered: add it to answers.yaml (or run at a terminal to be asked)", **base)
    correct = key.get("answer")
    if question.type == "choice":
        given = str(answer).strip().lower().rstrip(")")
        ok = given == str(correct).lower()
        if given not in question.choices:
            return CheckResult(status="failed", score=0.0, explanation=explanation,
                               message=f"answer {answer!r} is not one of the choices {', '.join(question.choices)}", **base)
        message = "correct" if ok else f"you chose {given}, the answer is {correct}"
    else:
        try:
            value = float(str(answer).replace(",", "").replace("_", ""))
        except ValueError:
            return CheckResult(status="failed", score=0.0, explanation=explanation,
                               message=f"answer {answer!r} is not a number", **base)
        target = float(correct)
        allowed = max(question.tolerance.get("abs", 0.0), question.tolerance.get("rel", 0.0) * abs(target))
        ok = math.isfinite(value) and abs(value - target) <= allowed
        message = "correct" if ok else f"you answered {value:g}, the answer is {target:g}"
    return CheckResult(status="passed" if ok else "failed", score=question.points if ok else 0.0,
                       message=message, explanation=explanation, **base)
