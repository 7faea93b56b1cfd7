"""Conceptual questions: load answers, ask missing ones at a terminal, grade against the key.

A wrong answer is graded with what teaches without giving the key away: what the student gave, the
key's ``hint`` when it has one. The right answer and the key's ``explanation`` (which states it) travel
in the result as ``answer`` and ``explanation``; whether a student sees them is the grading's answer
policy (:data:`SHOW_ANSWERS`, applied by :func:`withhold_answers` and the Gradescope reporter).

A numeric question may be drawn per student: its spec's ``params`` give each ``{name}`` of the prompt a
list of values, one is picked from the student's id (:func:`draw`), and the key's answer is a formula
of the names (:func:`evaluate`: arithmetic and a few functions, parsed, never ``eval``).
"""

from __future__ import annotations

import ast
import hashlib
import math
import operator
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, TextIO

import yaml

from validator.results import CheckResult, Report
from validator.spec.schema import PLACEHOLDER, Challenge, Question

# Whether official grading shows the right answer (and the explanation, which states it) for a wrong one:
# never; after the due date (Gradescope holds it back until then; elsewhere it is never shown); always.
SHOW_ANSWERS = ("never", "after_due_date", "always")
OFFICIAL_SHOW_ANSWERS = "after_due_date"
STUDENT_KEY = "student"  # answers.yaml's `student: {id: ...}`: whose numbers the student's copy shows
MAX_ID_CHARS = 200


def show_answers_setting(value: Any, *, where: str = "show_answers") -> str:
    """``value`` as one of :data:`SHOW_ANSWERS`, or a ValueError that says which are allowed."""
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in SHOW_ANSWERS:
        raise ValueError(f"{where} must be one of {', '.join(SHOW_ANSWERS)}, got {value!r}")
    return text


class KeyAnswer(str):
    """An answer read from a file in the answer key's layout (``{answer: ...}``): the key graded against
    itself (the authoring loop), so a formula is evaluated for the student's numbers like the key's."""


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
    return {cid: {qid: _key_layout(value) for qid, value in questions.items()} for cid, questions in answers.items()}


def _key_layout(value: Any) -> Any:
    if not (isinstance(value, dict) and "answer" in value):
        return value
    answer = value["answer"]
    return KeyAnswer(answer) if isinstance(answer, str) else answer


def declared_id(answers: dict[str, Any]) -> str | None:
    """The student id answers.yaml names (``student: {id: ...}``), or None."""
    entry = answers.get(STUDENT_KEY)
    found = entry.get("id") if isinstance(entry, dict) else None
    if isinstance(found, bool) or not isinstance(found, (str, int)) or is_missing(found):
        return None
    return " ".join(str(found).split())[:MAX_ID_CHARS]


def id_note(answers: dict[str, Any], student_id: Any, challenges: list[Challenge]) -> str | None:
    """What to tell a student whose answers.yaml names another id than the one graded, where that changes
    numbers (a question of ``challenges`` is drawn per student); None otherwise."""
    declared = declared_id(answers)
    if not any(q.params and not is_missing((answers.get(ch.id) or {}).get(q.id))
               for ch in challenges for q in ch.questions):
        return None
    if not normal_id(student_id):
        return ("no student id came with this submission, so the questions drawn per student were graded with "
                "their example numbers (the ones submit-build shows without --student-id)")
    if declared is None:
        return (f"the questions drawn per student were graded with the numbers of {student_id!r}; set "
                f"`student: {{id: {student_id}}}` in answers.yaml so that submit-build shows you those numbers")
    if normal_id(declared) != normal_id(student_id):
        return (f"answers.yaml names the student id {declared!r}, but this submission is from {student_id!r}: "
                f"the questions drawn per student were graded with the numbers of {student_id!r} (run "
                f"`validator submit-build --student-id {student_id}` to see them)")
    return None


def normal_id(student_id: Any) -> str:
    """An id as numbers are drawn from it: spaces squeezed, lower case (an email's case does not matter)."""
    return " ".join(str(student_id or "").split()).lower()[:MAX_ID_CHARS]


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


def set_student_id(path: Path, student_id: str) -> bool:
    """Record ``student_id`` in the answers file (``student: {id: ...}``), comments kept where possible;
    returns False when the file had to be rewritten whole (see :func:`save_answers`)."""
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    before = _mapping(text)
    if before is not None and declared_id(before) is not None:  # an id is there: replace its value in place
        edited = _replace_id_line(text, student_id)
        want = {**before, STUDENT_KEY: {**before[STUDENT_KEY], "id": student_id}}
        from validator.reporters import write_atomic

        if edited is not None and _mapping(edited) == want:
            write_atomic(path, edited)
            return True
        write_atomic(path, yaml.safe_dump(want, sort_keys=False, allow_unicode=True))
        return False
    return save_answers(path, {STUDENT_KEY: {"id": student_id}})


def _mapping(text: str) -> dict | None:
    try:
        data = (yaml.safe_load(text) or {}) if text.strip() else {}
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _replace_id_line(text: str, student_id: str) -> str | None:
    """``text`` with the value of ``student: {id: ...}`` (block style) replaced, or None where it is not there."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return None
    if not isinstance(root, yaml.MappingNode):
        return None
    for key, node in root.value:
        if str(key.value) == STUDENT_KEY and isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if str(k.value) == "id" and isinstance(v, yaml.ScalarNode):
                    return text[:v.start_mark.index] + _scalar(student_id) + text[v.end_mark.index:]
    return None


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
        out: TextIO = sys.stdout, *, student: Any = None) -> Any:
    """Prompt for one answer at the terminal; a malformed one is refused and asked again.

    Empty input leaves the question unanswered. A question drawn per student shows ``student``'s numbers.
    """
    values = draw(challenge.id, question, student)
    out.write(f"\n[{challenge.id}] {render(question.prompt, values).strip()}\n")
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


# -- per-student numbers ---------------------------------------------------------------------------------
def draw(challenge_id: str, question: Question, student_id: Any) -> dict[str, int | float]:
    """The question's numbers for a student: each param's value picked by a hash of the student's id, the
    challenge, the question and the param; without an id, each param's first value (the handout's example).

    Anyone can compute anyone's numbers (that is how a student sees theirs before submitting); what
    cannot be passed around is an answer, since a classmate's numbers differ.
    """
    who = normal_id(student_id)
    out: dict[str, int | float] = {}
    for name, values in question.params.items():
        if not who:
            out[name] = values[0]
            continue
        digest = hashlib.sha256("\0".join((who, challenge_id, question.id, name)).encode("utf-8")).digest()
        out[name] = values[int.from_bytes(digest[:8], "big") % len(values)]
    return out


def render(text: str, values: dict[str, Any]) -> str:
    """``text`` with each ``{name}`` (or ``{name:format}``, e.g. ``{n:,}``) replaced by its value; other
    braces are left as written."""
    if not values:
        return text

    def one(match) -> str:
        name, spec = match.group(1), match.group(2) or ""
        if name not in values:
            return match.group(0)
        try:
            return format(values[name], spec)
        except (TypeError, ValueError):
            return str(values[name])
    return PLACEHOLDER.sub(one, text)


def unrendered(question: Question, text: str | None = None) -> str:
    """A prompt (or ``text``) as a page shows it to everyone: each number drawn per student as ``<name>``."""
    text = question.prompt if text is None else text
    if not question.params:
        return text
    return PLACEHOLDER.sub(lambda m: f"<{m.group(1)}>" if m.group(1) in question.params else m.group(0), text)


def numbers_text(values: dict[str, Any]) -> str:
    """``n = 8192, d = 768``: a student's numbers, as the feedback names them."""
    return ", ".join(f"{name} = {show_number(v)}" for name, v in values.items())


def show_number(value: float) -> str:
    """A number as a person reads it: exact integers whole (12345678), others to 6 significant figures."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


# -- formulas of the key -----------------------------------------------------------------------------------
class FormulaError(ValueError):
    """A key's formula that cannot be evaluated; the message says why."""


MAX_FORMULA_CHARS = 500
_CONSTANTS = {"pi": math.pi, "e": math.e, "tau": math.tau}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log2": math.log2, "log10": math.log10,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "ceil": math.ceil, "floor": math.floor,
    "round": round, "abs": abs, "min": min, "max": max}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_MAX_MAGNITUDE = 1e30


def formula_names(formula: Any) -> set[str]:
    """The names a formula uses (``{d_model}`` and ``d_model`` alike), constants and functions apart."""
    if not isinstance(formula, str):
        return set()
    try:
        tree = ast.parse(_braces_off(formula), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return set()
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called - set(_CONSTANTS)


def _braces_off(text: str) -> str:
    return PLACEHOLDER.sub(lambda m: m.group(1), text)


def evaluate(formula: Any, values: dict[str, Any]) -> float:
    """A key's answer as a number: a number, or a formula of ``values``' names (``{d_model} * 4 / 2**20``).

    Only numbers, the names, ``+ - * / // % **``, parentheses, ``pi``/``e``/``tau`` and the functions
    sqrt, exp, log, log2, log10, sin, cos, tan, ceil, floor, round, abs, min, max are understood; the
    text is parsed, never executed, and every step is kept finite and below 1e30.
    """
    if isinstance(formula, bool):
        raise FormulaError(f"{formula!r} is not a number or a formula")
    if isinstance(formula, (int, float)):
        return float(formula)
    text = str(formula)
    if len(text) > MAX_FORMULA_CHARS:
        raise FormulaError(f"the formula is longer than {MAX_FORMULA_CHARS} characters")
    plain = parse_number(text)
    if plain is not None:
        return plain
    try:
        tree = ast.parse(_braces_off(text).strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError) as exc:
        raise FormulaError(f"{text!r} is not a formula: {getattr(exc, 'msg', exc)}") from None
    try:
        result = _eval(tree.body, values)
    except FormulaError as exc:
        raise FormulaError(f"{text!r}: {exc}") from None
    except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
        raise FormulaError(f"{text!r} cannot be evaluated for {numbers_text(values) or 'no numbers'}: "
                           f"{type(exc).__name__}: {exc}") from None
    return float(result)


def _eval(node: ast.AST, values: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise FormulaError(f"{node.value!r} is not a number")
        return _bounded(node.value)
    if isinstance(node, ast.Name):
        if node.id in values:
            return _bounded(values[node.id])
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise FormulaError(f"unknown name {node.id!r} (the question's numbers: {', '.join(values) or 'none'})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, values), _eval(node.right, values)
        if isinstance(node.op, ast.Pow) and (abs(right) > 256 or abs(left) > 1e12):
            raise FormulaError("a power too large to compute")
        return _bounded(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand, values))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
            and not node.keywords and all(not isinstance(a, ast.Starred) for a in node.args):
        return _bounded(_FUNCTIONS[node.func.id](*[_eval(a, values) for a in node.args]))
    raise FormulaError(f"{type(node).__name__} is not allowed (numbers, names, arithmetic and "
                       f"{', '.join(_FUNCTIONS)} only)")


def _bounded(value: Any) -> Any:
    if isinstance(value, complex) or not math.isfinite(value) or abs(value) > _MAX_MAGNITUDE:
        raise FormulaError(f"a step gives {value!r}, not a finite number below 1e30")
    return value


def expected_answer(question: Question, entry: dict[str, Any], values: dict[str, Any]) -> str | float:
    """The key's answer for these numbers: a choice's letter, or a numeric answer (formulas evaluated)."""
    correct = entry.get("answer")
    if question.type == "choice":
        return choice_letter(correct)
    return evaluate(correct, values)


def key_answers(key: dict[str, Any], catalogue: dict[str, Challenge], student_id: Any = None) -> dict[str, dict]:
    """``challenge -> {question -> answer}``: the key's answers as the student ``student_id`` would give
    them (formulas evaluated for that student's numbers); what the canary and the authoring loop answer."""
    out: dict[str, dict[str, Any]] = {}
    for cid, entries in (key or {}).items():
        challenge = catalogue.get(cid)
        questions = {q.id: q for q in challenge.questions} if challenge is not None else {}
        mine: dict[str, Any] = {}
        for qid, entry in (entries or {}).items():
            if not isinstance(entry, dict):
                continue
            q = questions.get(qid)
            if q is None or q.type == "choice":
                mine[qid] = entry.get("answer")
                continue
            value = evaluate(entry.get("answer"), draw(cid, q, student_id))
            mine[qid] = int(value) if value.is_integer() and abs(value) < 2**53 else value
        out[cid] = mine
    return out


def tolerance_text(question: Question) -> str:
    rel, absolute = question.tolerance.get("rel", 0.0), question.tolerance.get("abs", 0.0)
    parts = ([f"±{rel * 100:g}%"] if rel else []) + ([f"±{absolute:g}"] if absolute else [])
    return " or ".join(parts) if parts else "exactly"


def _unit(question: Question) -> str:
    unit = (question.unit or "").strip()
    return "" if unit.lower() in ("", "dimensionless", "none", "-") else f" {unit}"


# -- grading ------------------------------------------------------------------------------------------------
def grade_question(question: Question, answer: Any, key: dict[str, Any] | None, *, challenge: str = "",
                   student: Any = None) -> CheckResult:
    """Grade one answer. ``student`` (an id) draws the question's numbers (see :func:`draw`).

    A wrong answer's message says what was given (and the key's ``hint``); the right answer and the
    explanation are in ``answer`` and ``explanation``, for the answer policy to show or withhold.
    """
    values = draw(challenge, question, student)
    numbers = f" (your numbers: {numbers_text(values)})" if values else ""
    base = dict(id=f"question_{question.id}", kind="question", max_score=question.points,
                title=_title(render(question.prompt, values)))
    if key is None:
        problem = answer_problem(question, answer)
        message = ("not answered" if is_missing(answer) else
                   f"recorded, but it would score 0 at official submission: answer {problem}" if problem else
                   "recorded (format valid); graded at official submission")
        return CheckResult(status="skipped", score=0.0, message=message + numbers, **base)
    if is_missing(answer):  # the explanation is shown once the question was graded with an answer
        return CheckResult(status="failed", score=0.0,
                           message="not answered: add it to answers.yaml (or run at a terminal to be asked)" + numbers,
                           **base)
    problem = answer_problem(question, answer) if not isinstance(answer, KeyAnswer) else None
    if problem:
        return CheckResult(status="failed", score=0.0, message=f"answer {problem}", **base)
    try:
        correct = expected_answer(question, key, values)
        explanation = key.get("explanation")
        explanation = render(str(explanation), {**values, "answer": _shown_answer(question, correct)}) \
            if explanation else None
        if question.type == "choice":
            given = choice_letter(answer)
            ok = given == correct
            message = "correct" if ok else f"you chose {given}: not the answer"
        else:
            value = evaluate(answer, values) if isinstance(answer, KeyAnswer) else parse_number(answer)
            allowed = max(question.tolerance.get("abs", 0.0), question.tolerance.get("rel", 0.0) * abs(correct))
            ok = abs(value - correct) <= allowed
            within = tolerance_text(question)
            message = "correct" if ok else (f"you answered {show_number(value)}{numbers}: not the answer "
                                            + ("(exactly)" if within == "exactly" else f"(within {within})"))
    except FormulaError as exc:
        return CheckResult(status="error", score=0.0, message=f"the answer key cannot grade this question ({exc}): "
                           "not your fault; course staff will regrade it", **base)
    if ok:
        return CheckResult(status="passed", score=question.points, message=message, explanation=explanation, **base)
    hint = key.get("hint")
    if hint:
        message += f"\nhint: {' '.join(render(str(hint), values).split())}"
    return CheckResult(status="failed", score=0.0, message=message, explanation=explanation,
                       answer=_shown_answer(question, correct), **base)


def _shown_answer(question: Question, correct: Any) -> str:
    if question.type == "choice":
        text = " ".join(str(question.choices.get(correct, "")).split())
        return f"{correct}) {text}" if text else str(correct)
    return show_number(correct) + _unit(question)


# -- the answer policy ------------------------------------------------------------------------------------
def is_withheld(check: CheckResult) -> bool:
    """A graded question whose answer or explanation a student sees only where the policy shows answers."""
    return check.kind == "question" and check.status != "passed" and bool(check.answer or check.explanation)


def revealed_lines(check: CheckResult) -> list[str]:
    """The right answer and why, as lines (empty where the result holds neither)."""
    lines = [f"answer: {check.answer}"] if check.answer else []
    if check.explanation:
        lines.append(f"why: {' '.join(check.explanation.split())}")
    return lines


def withhold_answers(report: Report, show: str) -> Report:
    """``report`` as a student may read it now under the policy ``show`` (:data:`SHOW_ANSWERS`): unless
    answers are shown ``always``, a wrong answer keeps its message and hint, and loses the right answer
    and the explanation (which states it). ``after_due_date`` is ``never`` here: only Gradescope can hold
    text back until the due date (see :mod:`validator.reporters.gradescope`)."""
    show = show_answers_setting(show)
    if show == "always" or not any(is_withheld(c) for ch in report.challenges for c in ch.checks):
        return report
    return replace(report, challenges=[
        replace(ch, checks=[replace(c, answer=None, explanation=None) if is_withheld(c) else c for c in ch.checks])
        for ch in report.challenges])
