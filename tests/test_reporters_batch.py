"""The batch reporters: Gradescope results.json (schema-checked), JUnit XML (parsed), the CSV gradebook."""

from __future__ import annotations

import csv
import io
import xml.etree.ElementTree as ET

import jsonschema
import pytest

from validator.batch.reports import failed_report, report_from_dict
from validator.reporters.csv_report import grades_csv
from validator.reporters.gradescope import gradescope_dict
from validator.reporters.junit import junit_xml
from validator.results import ChallengeResult, CheckResult, Report

# Gradescope's results.json (https://gradescope-autograders.readthedocs.io/en/latest/specs/), as a schema.
GRADESCOPE_SCHEMA = {
    "type": "object",
    "required": ["score", "tests", "execution_time", "output"],
    "properties": {
        "score": {"type": "number"},
        "execution_time": {"type": "number", "minimum": 0},
        "output": {"type": "string"},
        "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "stdout_visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
        "tests": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "output", "visibility"],  # score, max_score, status: optional
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "score": {"type": "number", "minimum": 0},
                    "max_score": {"type": "number", "minimum": 0},
                    "status": {"enum": ["passed", "failed"]},
                    "output": {"type": "string"},
                    "visibility": {"enum": ["hidden", "after_due_date", "after_published", "visible"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "number": {"type": "string"},
                },
            },
        },
    },
}

NASTY = "\x00\x1b[2J]]></failure>\ud800<b>&amp;\r\n\"'"


def make_report() -> Report:
    checks = [
        CheckResult(id="shape", kind="shape", status="passed", score=2, max_score=2, title="shape ok",
                    duration_s=0.1),
        CheckResult(id="values", kind="values", status="failed", score=0, max_score=3, message="1 of 4 differ\nworst...",
                    reproduce="validator submit-build --check values --seed 0", duration_s=0.2),
        CheckResult(id="grad", kind="gradient", status="error", score=0, max_score=1, message="crashed " + NASTY),
        CheckResult(id="speed", kind="performance", status="skipped", score=0, max_score=1, message="deferred"),
        CheckResult(id="negative", kind="ids", status="advisory", score=0, max_score=0, message="raise IndexError"),
        CheckResult(id="q1", kind="question", status="passed", score=1, max_score=1),
    ]
    other = [CheckResult(id="import", kind="structure", status="error", score=0, max_score=4,
                         message="not run: see the problem above")]
    return Report(challenges=[ChallengeResult(id="token_embedding", title="Token embedding", checks=checks),
                              ChallengeResult(id="tied_lm_head", title="Tied head", checks=other,
                                              problem="layers.py could not be imported: " + NASTY)],
                  seed=7, student="alice", profile="batch", duration_s=1.5, notes=["a note"])


def test_gradescope_results_validate_against_the_format():
    report = make_report()
    data = gradescope_dict(report)
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    assert data["score"] == report.score == sum(t["score"] for t in data["tests"])
    assert sum(t["max_score"] for t in data["tests"]) == report.max_score
    by_name = {t["name"]: t for t in data["tests"]}
    assert by_name["token_embedding / values"]["status"] == "failed"
    assert "reproduce: validator submit-build" in by_name["token_embedding / values"]["output"]
    assert by_name["token_embedding / negative"]["status"] == "passed"  # advice, not a failure
    assert "could not be imported" in by_name["tied_lm_head / import"]["output"]


def test_gradescope_hidden_visibility():
    data = gradescope_dict(make_report(), visibility="hidden")
    jsonschema.validate(data, GRADESCOPE_SCHEMA)
    assert {t["visibility"] for t in data["tests"]} == {"hidden"}


def test_junit_parses_and_counts_match():
    report = make_report()
    root = ET.fromstring(junit_xml(report, name="alice"))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["token_embedding", "tied_lm_head"]
    cases = root.findall("testsuite/testcase")
    assert int(root.get("tests")) == len(cases) == 7
    assert int(root.get("failures")) == len(root.findall("testsuite/testcase/failure")) == 1
    assert int(root.get("errors")) == len(root.findall("testsuite/testcase/error")) == 2
    assert int(root.get("skipped")) == len(root.findall("testsuite/testcase/skipped")) == 1
    for suite in suites:
        for key in ("tests", "failures", "errors", "skipped", "time"):
            assert suite.get(key) is not None
        assert int(suite.get("tests")) == len(suite.findall("testcase"))
    for case in cases:
        assert case.get("classname").startswith("alice.") and case.get("name") and float(case.get("time")) >= 0
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("message") == "1 of 4 differ" and "worst" in failure.text


def test_junit_survives_characters_xml_cannot_hold():
    root = ET.fromstring(junit_xml(make_report()))
    error = root.findall("testsuite/testcase/error")[0]
    assert "\x00" not in error.text and "\\x00\\x1b[2J" in error.text and "\\ud800" in error.text  # shown
    assert "]]></failure>" in error.text  # escaped, not interpreted


# -- student text is shown, never acted on ---------------------------------------------------------------
INJECTION = ("::error title=Grade::Official grade 41/41\n  ::add-mask::secret\n\x1b[2J\x1b[1K\x1b]8;;http://x\x07"
             "link\x1b]8;;\x07 ##[error]old style\rover\x08\x08written\u202eevil\x9b31m")


def acting(text: str) -> list[str]:
    """What in ``text`` a terminal or a GitHub runner would act on: control characters (but newline and
    tab), bidi overrides, lines a runner reads as workflow commands."""
    import re

    found = re.findall("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]", text)
    found += [line for line in text.splitlines() if line.lstrip().startswith("::") or "##[" in line]
    return found


def hostile_report() -> Report:
    checks = [CheckResult(id="values", kind="values", status="error", score=0, max_score=3,
                          title="the output", message="your forward raised:\n" + INJECTION),
              CheckResult(id="question_q", kind="question", status="failed", score=0, max_score=1,
                          message="you chose a: not the answer", answer="b) right", explanation="because b")]
    return Report(challenges=[ChallengeResult(id="token_embedding", title="T", checks=checks,
                                              problem="import failed:\n" + INJECTION,
                                              implementations={"Embedding": INJECTION})],
                  seed=7, student="evil\x1b[2J\n::error::name", profile="batch", notes=["note " + INJECTION])


def test_every_report_shows_student_text_without_acting_on_it():
    import json

    from validator.reporters.html import render_html
    from validator.reporters.json_report import report_dict

    report = hostile_report()
    outputs = {"gradescope": json.loads(json.dumps(gradescope_dict(report))),
               "json": report_dict(report), "junit": junit_xml(report).decode("utf-8"),
               "csv": grades_csv([(report.student, report)]), "html": render_html(report)}
    for name, out in outputs.items():
        texts = [out] if isinstance(out, str) else [v for v in _strings(out)]
        assert not [a for t in texts for a in acting(t)], (name, [a for t in texts for a in acting(t)])
    shown = outputs["gradescope"]["tests"][0]["output"]
    assert "\\x1b[2J" in shown and ": :error title=Grade" in shown and "# #[error]" in shown and "\\r" in shown


def _strings(data):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(data, list):
        for v in data:
            yield from _strings(v)


def test_the_batch_progress_lines_show_names_and_failures_without_acting_on_them():
    from validator.batch.progress import Progress

    out = io.StringIO()
    progress = Progress(2, stream=out, live=False)
    progress.advance("bob\x1b[2J\r::error::x", "3/4 in 1.0 s")
    progress.log("grader failure on x:\n" + INJECTION)
    assert not acting(out.getvalue()), out.getvalue()
    assert "bob\\x1b[2J\\r::error::x: 3/4" in out.getvalue()


def test_the_right_answer_follows_the_answer_policy_in_results_json():
    report = hostile_report()
    by_policy = {show: gradescope_dict(report, show_answers=show) for show in ("never", "after_due_date", "always")}
    for show, data in by_policy.items():
        jsonschema.validate(data, GRADESCOPE_SCHEMA)
        assert data["score"] == report.score
        question = next(t for t in data["tests"] if t["name"] == "token_embedding / question_q")
        assert ("answer: b) right" in question["output"]) == (show == "always"), (show, question)
        assert ("because b" in question["output"]) == (show == "always")
    later = [t for t in by_policy["after_due_date"]["tests"] if t["visibility"] == "after_due_date"]
    assert [t["name"] for t in later] == ["token_embedding / question_q: the answer"]
    assert "answer: b) right" in later[0]["output"] and "why: because b" in later[0]["output"]
    assert "score" not in later[0] and "max_score" not in later[0]  # no points: the total is unchanged
    assert "b) right" not in str(by_policy["never"]) and "because b" not in str(by_policy["never"])


def test_csv_gradebook_rows_and_columns():
    a = make_report()
    b = Report(challenges=[ChallengeResult(id="token_embedding", title="", checks=[
        CheckResult(id="x", kind="shape", status="passed", score=1, max_score=9)])], seed=0, student="b",
        profile="batch")
    text = grades_csv([("zed", b), ("=HYPERLINK(evil)", a)], challenges=["tied_lm_head", "token_embedding"])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["name", "score", "max_score", "tied_lm_head", "token_embedding", "review"]
    assert rows[1] == ["'=HYPERLINK(evil)", "3", "12", "0", "3", ""]
    assert rows[2] == ["zed", "1", "9", "", "1", ""]


def test_report_round_trips_through_json():
    report = make_report()
    again = report_from_dict(report.to_dict())
    assert again.to_dict() == report.to_dict()


def test_failed_report_keeps_the_max_score():
    from validator import paths
    from validator.spec import load_catalogue

    catalogue = load_catalogue(paths.challenges_dir())
    chosen = list(catalogue.values())[:2]
    report = failed_report("bob", chosen, "the grader failed", seed=0, profile="batch")
    expected = sum(c.points for ch in chosen for c in ch.checks) + sum(q.points for ch in chosen for q in ch.questions)
    assert report.score == 0 and report.max_score == pytest.approx(expected)
    assert all(c.status == "error" for ch in report.challenges for c in ch.checks)


def test_reports_are_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """Every reporter writes through one temp-then-rename step: a failed write keeps the old file and
    leaves no temporary behind (the strength report used to write in place)."""
    from pathlib import Path

    from validator.reporters import write_atomic

    target = tmp_path / "out" / "grades.csv"
    write_atomic(target, "old\n")
    assert target.read_text() == "old\n"

    def full_disk(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError):
        write_atomic(target, "new\n")
    monkeypatch.undo()
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["grades.csv"]
    write_atomic(target, b"bytes\n")
    assert target.read_bytes() == b"bytes\n"


def test_sanitizing_skips_plain_text_and_numbers_and_still_shows_every_attack():
    """The fast paths (text with nothing to show, lists of numbers) change nothing a reader sees: each piece of
    the injection is still shown, plain text and numbers come back equal, and containers keep their types."""
    from validator.reporters.sanitize import safe, visible

    plain = "mean 0.00292 (expected 0 ± 0.0171): a:b, x[0], ## heading, #[x]"
    assert visible(plain) == plain and visible(plain, newlines=False) == plain
    for piece in INJECTION.split(" "):
        assert not acting(visible(piece)), piece
    assert visible("a\n::error::x") == "a\n: :error::x" and visible("x ##[error]y") == "x # #[error]y"
    assert visible("line\r\nnext") == "line\nnext" and visible("a\tb", newlines=False) == "a\\tb"
    data = {"counts": [1, 2, 3], "edges": (0.5, 1.5), "pair": (1, "x\x1b"), "flags": [True, None],
            "mixed": [1, "::error::y"]}
    out = safe(data)
    assert out["counts"] == [1, 2, 3] and out["counts"] is not data["counts"] and out["edges"] == (0.5, 1.5)
    assert out["flags"] == [True, None] and out["mixed"] == [1, ": :error::y"]
    assert type(out["pair"]) is tuple and out["pair"] == (1, "x\\x1b")


def test_a_report_made_visible_once_is_not_cleaned_again_and_a_changed_copy_is():
    """A batch writes four reports of one result: safe_report hands back a report it made itself, but a copy
    changed with dataclasses.replace (the answer policy's) is cleaned again, to the same text."""
    from dataclasses import replace

    from validator.questions import withhold_answers
    from validator.reporters.sanitize import safe_report

    clean = safe_report(hostile_report())
    assert safe_report(clean) is clean
    assert safe_report(clean.challenges[0]) is clean.challenges[0]
    changed = replace(clean, student="x\x1b[2Jy")
    again = safe_report(changed)
    assert again is not changed and again.student == "x\\x1b[2Jy" and again.challenges[0] is clean.challenges[0]
    wrong = CheckResult(id="q", kind="question", status="failed", score=0, max_score=1, message="wrong",
                        answer="B", explanation="because B")
    report = Report(challenges=[ChallengeResult(id="c", title="C", checks=[wrong])], seed=0, student="s",
                    profile="batch")
    shown = withhold_answers(report, "never")
    assert shown.challenges[0].checks[0].answer is None and shown.challenges[0].checks[0].explanation is None
    assert wrong.answer == "B" and wrong.explanation == "because B"  # the graded result is left as it was


def test_result_dicts_are_what_asdict_makes_without_sharing_anything():
    from dataclasses import asdict

    from validator.results import Histogram

    check = CheckResult(id="init", kind="init", status="passed", score=1, max_score=1, review=["r"],
                        figures=[Histogram(title="w", edges=[0.0, 1.0], counts=[3], expected=[0.5],
                                           bounds=[0.0, 1.0], on_bounds=[0, 0], notes=["n"])])
    out = check.to_dict()
    assert out == asdict(check)
    out["review"].append("x")
    out["figures"][0]["counts"].append(9)
    assert check.review == ["r"] and check.figures[0].counts == [3]


def test_report_json_is_indented_to_the_check_and_reads_back_equal(tmp_path):
    import json

    from validator.reporters import readable_json
    from validator.reporters.gradescope import write_gradescope
    from validator.reporters.json_report import report_dict, write_json

    report = make_report()
    write_json(report, tmp_path / "r.json")
    text = (tmp_path / "r.json").read_text()
    assert json.loads(text) == report_dict(report)
    checks = [line for line in text.splitlines() if line.lstrip().startswith('{"id": ')]
    assert len(checks) == sum(len(ch.checks) for ch in report.challenges)  # one line a check
    write_gradescope(report, tmp_path / "g.json")
    assert json.loads((tmp_path / "g.json").read_text()) == json.loads(json.dumps(gradescope_dict(report)))
    data = {"a": [1, 2.5, None], "b": {"c": [{"x": 1}, [2]], "e": [], "f": {}}, 3: True}
    for depth in range(4):
        assert json.loads(readable_json(data, flat_below=depth)) == json.loads(json.dumps(data))
    assert readable_json(data, flat_below=1).splitlines()[1] == '  "a": [1, 2.5, null],'
