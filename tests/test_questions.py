"""Question grading: choices, numeric tolerance, unanswered, handout mode, interactive prompts."""

import io

import pytest

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
    assert "not a plain number" in grade_question(NUMERIC, "lots", key).message
    assert "not a plain number" in grade_question(NUMERIC, "500 MiB", key).message


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
    replies = iter(["b" if q.type == "choice" else "12" for q in ch.questions])
    path = tmp_path / "answers.yaml"
    answers = {}
    asked = ask_missing([ch], answers, path, read=lambda _: next(replies), out=io.StringIO())
    assert asked == len(ch.questions)
    assert load_answers(path)[ch.id] == {q.id: "b" if q.type == "choice" else 12 for q in ch.questions}


def test_prompt_refuses_a_malformed_answer_and_asks_again():
    from validator.questions import ask
    from validator.spec.schema import Challenge

    ch = Challenge.model_construct(id="c", questions=[NUMERIC, CHOICE])
    replies, out = iter(["500 MiB", "500"]), io.StringIO()
    assert ask(ch, NUMERIC, read=lambda _: next(replies), out=out) == 500
    assert "not saved: '500 MiB' is not a plain number" in out.getvalue()
    replies, out = iter(["e", "B)"]), io.StringIO()
    assert ask(ch, CHOICE, read=lambda _: next(replies), out=out) == "b"
    assert "not saved: 'e' is not one of the choices a, b" in out.getvalue()
    assert ask(ch, CHOICE, read=lambda _: "", out=io.StringIO()) is None  # Enter skips


def test_formats_are_checked_without_the_key():
    from validator.questions import answer_formats
    from validator.spec.schema import Challenge

    ch = Challenge.model_construct(id="c", questions=[NUMERIC, CHOICE])
    assert answer_formats(ch, {"n": "1,024", "q": "e"}) == [
        ("n", "valid", None), ("q", "invalid", "'e' is not one of the choices a, b: give the letter only")]
    assert answer_formats(ch, {})[0] == ("n", "missing", "not answered")
    handout = grade_question(NUMERIC, "500 MiB", None)
    assert handout.status == "skipped" and "would score 0" in handout.message and "plain number" in handout.message
    assert "format valid" in grade_question(NUMERIC, "500", None).message


def test_explanation_only_after_a_graded_answer():
    key = {"answer": "b", "explanation": "because"}
    assert grade_question(CHOICE, None, key).explanation is None
    assert grade_question(CHOICE, "z", key).explanation is None
    assert grade_question(CHOICE, "a", key).explanation == "because"


def test_the_answer_key_is_accepted_as_answers():
    """The authoring loop grades the reference with `--answers reference/answer_key.yaml`."""
    from pathlib import Path

    key = Path(__file__).resolve().parents[1] / "reference" / "answer_key.yaml"
    answers = load_answers(key)
    assert answers["token_embedding"]["gpt2_token_table_params"] == 38597376
    assert answers["token_embedding"]["negative_id_wraps"] == "a"


# -- the prompt edits answers.yaml in place ----------------------------------------------------
def _template_challenges():
    from pathlib import Path

    from validator.spec import load_catalogue

    return load_catalogue(Path(__file__).resolve().parents[1] / "challenges")


def test_prompt_edits_the_template_in_place(tmp_path):
    """Answering at the prompt keeps every comment (the questions and choices), leaves the other answers
    empty (not `null`), and stores numbers as numbers; only the answered lines change."""
    from pathlib import Path

    template = (Path(__file__).resolve().parents[1] / "student" / "answers.yaml").read_text()
    path = tmp_path / "answers.yaml"
    path.write_text(template)
    catalogue = _template_challenges()
    chosen = [catalogue["attention"], catalogue["token_embedding"]]
    first = {ch.id: ch.questions[0] for ch in chosen}
    token_reply = "b" if first["token_embedding"].type == "choice" else "12.5"
    replies = ["1,024"] + [""] * (len(chosen[0].questions) - 1) + [token_reply]  # Enter skips a question

    def read(_prompt, it=iter(replies)):
        try:
            return next(it)
        except StopIteration:
            raise EOFError from None  # the student stops answering: what was given is saved

    answers = {}
    asked = ask_missing(chosen, answers, path, read=read, out=io.StringIO())
    assert asked == 2
    after = path.read_text()
    changed = [(a, b) for a, b in zip(template.splitlines(), after.splitlines()) if a != b]
    assert len(template.splitlines()) == len(after.splitlines()) and len(changed) == 2, changed
    assert changed[0] == (f"  {first['attention'].id}:", f"  {first['attention'].id}: 1024")
    loaded = load_answers(path)
    assert loaded["attention"][first["attention"].id] == 1024
    assert "null" not in after and "'" not in "".join(b for _, b in changed)
    assert all(v is None for cid, qs in loaded.items() for q, v in qs.items()
               if (cid, q) not in {(c, first[c].id) for c in first})


@pytest.mark.parametrize("text,want", [
    ("", "c:\n  a: 1\n  b: x\n"),
    ("# mine\nc:\n", "# mine\nc:\n  a: 1\n  b: x\n"),
    ("c: {a: , z: 2}\n", "c: {a: 1 , z: 2, b: x}\n"),
    ("c:\n  a: ''   # trailing\n  z: 2\n", "c:\n  a: 1   # trailing\n  z: 2\n  b: x\n"),
    ("c:\n  a: ~\n  b: null\nd:\n  q: 5\n", "c:\n  a: 1\n  b: x\nd:\n  q: 5\n"),
    ("d:\n  q: 5", "d:\n  q: 5\nc:\n  a: 1\n  b: x\n"),
])
def test_save_answers_edits_each_layout_in_place(tmp_path, text, want):
    from validator.questions import save_answers

    path = tmp_path / "answers.yaml"
    if text:
        path.write_text(text)
    assert save_answers(path, {"c": {"a": 1, "b": "x"}}) is True
    assert path.read_text() == want


def test_save_answers_rewrites_a_layout_it_cannot_edit_and_keeps_every_answer(tmp_path):
    from validator.questions import save_answers

    path = tmp_path / "answers.yaml"
    path.write_text("# gone\nc:\n  a: {answer: }\n  z: 2\n")
    assert save_answers(path, {"c": {"a": 0.5}}) is False
    assert load_answers(path) == {"c": {"a": 0.5, "z": 2}}


def test_numbers_and_letters_are_stored_so_yaml_reads_them_back(tmp_path):
    from validator.questions import as_number, save_answers

    path = tmp_path / "answers.yaml"
    values = {"n": as_number("1.5e-5"), "m": as_number("1,234,567"), "y": "y", "yes": "yes", "f": as_number("256.0")}
    save_answers(path, {"c": values})
    assert load_answers(path) == {"c": values} and values["m"] == 1234567 and values["f"] == 256
