"""Conceptual questions: load answers, ask missing ones at a terminal, grade against the key."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

import yaml

from validator.results import CheckResult
from validator.spec.schema import Challenge, Question


class AnswersError(Exception):
    """The answers file cannot be read; the message says where and why."""


def load_answers(path: Path | None) -> dict[str, dict[str, Any]]:
    """A student's answers, read with the bounds of :mod:`validator.intake` (no links, size and depth caps)."""
    from validator.intake import IntakeError, read_answers

    if path is None or not os.path.lexists(path):
        return {}
    try:
        answers = read_answers(path)
    except IntakeError as exc:
        raise AnswersError(str(exc)) from None
    # The answer key has the same layout with `{answer, explanation}` per question: read its answers,
    # so that an instructor can grade the reference with `--answers reference/answer_key.yaml`.
    return {cid: {qid: value["answer"] if isinstance(value, dict) and "answer" in value else value
                  for qid, value in questions.items()} for cid, questions in answers.items()}


def load_key(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    if not path.exists():
        return {}
    return yaml.safe_load(path.read_text(encoding="utf-8")) or {}


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def parse_number(value: Any) -> float | None:
    """A numeric answer as a person writes it: ``1234567``, ``1,234,567``, ``1.23e6``, ``125.0``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        number = float(str(value).strip().replace(",", "").replace("_", ""))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def choice_letter(value: Any) -> str:
    """A choice answer as the letter it names: ``B``, ``b)`` and `` b `` all mean ``b``."""
    return str(value).strip().lower().rstrip(")")


def answer_problem(question: Question, value: Any) -> str | None:
    """Why ``value`` cannot be graded as an answer to ``question`` (its format, not its correctness).

    Needs no answer key, so a handout can tell a student before official grading that an answer
    would score 0 whatever it means.
    """
    if is_missing(value):
        return "not answered"
    if question.type == "choice":
        if choice_letter(value) not in question.choices:
            return f"{value!r} is not one of the choices {', '.join(question.choices)}: give the letter only"
        return None
    if parse_number(value) is None:
        unit = f" (in {question.unit})" if question.unit else ""
        return (f"{value!r} is not a plain number: write only the number{unit}, without units or suffixes, "
                "e.g. 1234567 or 1.23e6")
    return None


def answer_formats(challenge: Challenge, answers: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """(question id, 'valid' | 'invalid' | 'missing', why) for every question of a challenge."""
    rows = []
    for q in challenge.questions:
        value = answers.get(q.id)
        why = answer_problem(q, value)
        rows.append((q.id, "missing" if is_missing(value) else "invalid" if why else "valid", why))
    return rows


def ask(challenge: Challenge, question: Question, read: Callable[[str], str] = input,
        out: TextIO = sys.stdout) -> Any:
    """Prompt for one answer at the terminal; a malformed one is refused and asked again.

    Empty input leaves the question unanswered.
    """
    out.write(f"\n[{challenge.id}] {question.prompt.strip()}\n")
    if question.type == "choice":
        for letter, text in question.choices.items():
            out.write(f"  {letter}) {text}\n")
    unit = f" ({question.unit})" if question.unit else ""
    while True:
        raw = read(f"your answer{unit}: ").strip()
        if not raw:
            return None
        why = answer_problem(question, raw)
        if why is None:
            return choice_letter(raw) if question.type == "choice" else raw
        expected = ("one of " + ", ".join(question.choices)) if question.type == "choice" else \
            f"a plain number{unit}"
        out.write(f"  not saved: {why}. Expected {expected}; press Enter to skip.\n")


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
        problem = answer_problem(question, answer)
        message = ("not answered" if is_missing(answer) else
                   f"recorded, but it would score 0 at official submission: answer {problem}" if problem else
                   "recorded (format valid); graded at official submission")
        return CheckResult(status="skipped", score=0.0, message=message, **base)
    explanation = key.get("explanation")
    if is_missing(answer):  # the explanation is shown once the question was graded with an answer
        return CheckResult(status="failed", score=0.0,
                           message="not answered: add it to answers.yaml (or run at a terminal to be asked)", **base)
    problem = answer_problem(question, answer)
    if problem:
        return CheckResult(status="failed", score=0.0, message=f"answer {problem}", **base)
    correct = key.get("answer")
    if question.type == "choice":
        given = choice_letter(answer)
        ok = given == str(correct).lower()
        message = "correct" if ok else f"you chose {given}, the answer is {correct}"
    else:
        value = parse_number(answer)
        target = float(correct)
        allowed = max(question.tolerance.get("abs", 0.0), question.tolerance.get("rel", 0.0) * abs(target))
        ok = abs(value - target) <= allowed
        message = "correct" if ok else f"you answered {value:g}, the answer is {target:g}"
    return CheckResult(status="passed" if ok else "failed", score=question.points if ok else 0.0,
                       message=message, explanation=explanation, **base)
