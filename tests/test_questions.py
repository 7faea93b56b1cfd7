"""Question grading: choices, numeric tolerance, unanswered, handout mode, interactive prompts."""

import io

from validator.questions import grade_question, load_answers
from validator.spec.schema import Question
from validator.submit import ask_missing
from validator.spec import load_challenge

CHOICE = Question(id="q", type="choice", prompt="Pick", choices={"a": "x", "b": "y"}, points=2)
NUMERIC = Question(id="n", type="numeric", prompt="How many?", tolerance={"rel": 0.01}, points=1)


def test_choice():
    key = {"answer": "b", "explanation": "because"}
    assert grade_question(CHOICE, "B", key).score == 2
    wrong = grade_question(CHOICE, "a", key)
    assert wrong.status == "failed" and "the answer is b" in wrong.message and wrong.explanation == "because"
    assert "not one of the choices" in grade_question(CHOICE, "z", key).message


def test_numeric_with_tolerance_and_separators():
    key = {"answer": 38597376}
    assert grade_question(NUMERIC, "38,597,376", key).status == "passed"
    assert grade_question(NUMERIC, 38.6e6, key).status == "passed"
    assert grade_question(NUMERIC, 36e6, key).status == "failed"
    assert "not a number" in grade_question(NUMERIC, "lots", key).message


def test_unanswered_and_handout():
    assert "not answered" in grade_question(NUMERIC, None, {"answer": 1}).message
    recorded = grade_question(NUMERIC, 5, None)
    assert recorded.status == "skipped" and "official submission" in recorded.message


def test_answers_file_errors_name_the_line(tmp_path):
    bad = tmp_path / "answers.yaml"
    bad.write_text("token_embedding:\n  q: [unclosed\n")
    try:
        load_answers(bad)
    except Exception as exc:  # noqa: BLE001
        assert "answers.yaml:" in str(exc) and "invalid YAML" in str(exc)
    else:
        raise AssertionError("expected an error")


def test_interactive_prompt_saves_answers(tmp_path):
    from pathlib import Path
    ch = load_challenge(Path(__file__).resolve().parents[1] / "challenges" / "token_embedding.yaml")
    replies = iter(["b"] * 50)
    path = tmp_path / "answers.yaml"
    answers = {}
    asked = ask_missing([ch], answers, path, read=lambda _: next(replies), out=io.StringIO())
    assert asked == len(ch.questions)
    assert load_answers(path)[ch.id] == {q.id: "b" for q in ch.questions}
