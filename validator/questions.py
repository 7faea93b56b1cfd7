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
    """The answer key (instructor data, read on every grading run: libyaml's safe loader where installed)."""
    if not path.exists():
        return {}
    return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


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


def as_number(text: str) -> int | float:
    """A numeric answer typed at the prompt as the number YAML will store: ``1,024`` -> 1024, ``0.5`` -> 0.5."""
    number = parse_number(text)
    if number is None:
        raise ValueError(f"{text!r} is not a plain number")
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


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


# -- saving answers given at the prompt --------------------------------------------------
def save_answers(path: Path, new: dict[str, dict[str, Any]]) -> bool:
    """Write ``new`` answers (``challenge -> {question -> value}``) into the answers file at ``path``.

    Only those values are written, where the file leaves them empty (or where their question or
    challenge is added): every comment, every other answer and the way it was written stay as they
    were. Returns False when the file's layout gave no safe place for an answer and it was rewritten
    whole instead (its comments lost; the answers are all kept).
    """
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    edited = _edited(text, new)
    if edited is None:
        merged = (yaml.safe_load(text) or {}) if text.strip() else {}
        for cid, values in new.items():
            if not isinstance(merged.get(cid), dict):
                merged[cid] = {}
            merged[cid].update(values)
        edited, in_place = yaml.safe_dump(merged, sort_keys=False, allow_unicode=True), False
    else:
        in_place = True
    from validator.reporters import write_atomic

    write_atomic(path, edited)
    return in_place


def _scalar(value: Any) -> str:
    """``value`` as one YAML scalar in flow context: ``b``, ``1024``, ``1.0e-05``, ``'yes'``."""
    return yaml.safe_dump([value], default_flow_style=True, allow_unicode=True, width=2**31).strip()[1:-1]


def _is_empty(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and (node.tag.endswith(":null") or not str(node.value).strip())


def _edited(text: str, new: dict[str, dict[str, Any]]) -> str | None:
    """``text`` with ``new`` filled in, by edits at the nodes' positions; None where that is not safe
    (a flow mapping without the question, a value that is not empty, an answers file that is not a
    mapping), or where the edited text would not read back as exactly the old answers plus the new."""
    try:
        before = (yaml.safe_load(text) or {}) if text.strip() else {}
        root = yaml.compose(text) if text.strip() else None
    except yaml.YAMLError:
        return None
    if not isinstance(before, dict) or (root is not None and not isinstance(root, yaml.MappingNode)):
        return None
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in characters
    appended: list[str] = []
    entries = {str(k.value): (k, v) for k, v in root.value} if root is not None else {}
    top_indent = root.value[0][0].start_mark.column if root is not None and root.value else 0
    for cid, values in new.items():
        if not values:
            continue
        if cid not in entries:
            appended.append(f"{' ' * top_indent}{_scalar(cid)}:\n"
                            + "".join(f"{' ' * (top_indent + 2)}{_scalar(q)}: {_scalar(v)}\n" for q, v in values.items()))
            continue
        key, node = entries[cid]
        indent = " " * (key.start_mark.column + 2)
        if _is_empty(node):  # `challenge:` with nothing under it yet
            lines = "".join(f"\n{indent}{_scalar(q)}: {_scalar(v)}" for q, v in values.items())
            edits.append((node.start_mark.index, node.end_mark.index, lines))
            continue
        if not isinstance(node, yaml.MappingNode):
            return None
        questions = {str(k.value): v for k, v in node.value}
        missing = {q: v for q, v in values.items() if q not in questions}
        for qid, value in values.items():
            if qid in questions:
                if not _is_empty(questions[qid]):
                    return None
                start, end = questions[qid].start_mark.index, questions[qid].end_mark.index
                edits.append((start, end, (" " if text[start - 1:start] == ":" else "") + _scalar(value)))
        if not missing:
            continue
        if node.flow_style:
            end = node.end_mark.index - 1  # before the closing brace
            pairs = ", ".join(f"{_scalar(q)}: {_scalar(v)}" for q, v in missing.items())
            edits.append((end, end, (", " if node.value else "") + pairs))
            continue
        if node.value:
            indent = " " * node.value[0][0].start_mark.column
            last = node.value[-1][1].end_mark.index
            line_end = text.find("\n", last)
            at = len(text) if line_end < 0 else line_end
        else:
            return None
        edits.append((at, at, "".join(f"\n{indent}{_scalar(q)}: {_scalar(v)}" for q, v in missing.items())))
    out = text
    for start, end, replacement in sorted(edits, reverse=True):
        out = out[:start] + replacement + out[end:]
    if appended:
        out = out + ("\n" if out and not out.endswith("\n") else "") + "".join(appended)
    want = {cid: dict(qs or {}) for cid, qs in before.items()}
    for cid, values in new.items():
        if values:
            want.setdefault(cid, {}).update(values)
    try:
        after = yaml.safe_load(out) or {}
    except yaml.YAMLError:
        return None
    return out if after == want else None


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
            return choice_letter(raw) if question.type == "choice" else as_number(raw)
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
