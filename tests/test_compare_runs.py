"""Regrade audit on synthetic runs (no grading): which students and checks moved, why, and --no-lowering."""

from __future__ import annotations

import csv
import io
import json

from validator.batch import compare as cmp
from validator.batch.reports import report_from_dict
from validator.cli import build_parser
from validator.results import ChallengeResult, CheckResult, Report


def report(name: str, passed: dict[str, bool]) -> Report:
    checks = [CheckResult(id=c, kind="question" if c.startswith("q") else "values",
                          status="passed" if ok else "failed", score=1.0 if ok else 0.0, max_score=1.0)
              for c, ok in passed.items()]
    return Report(challenges=[ChallengeResult(id="rms_norm", title="RMSNorm", checks=checks)], seed=0,
                  student=name, profile="batch")


def run(checks: dict[str, str], *, grader="g1", reference="r1", digests=None, seed=0) -> dict:
    return {"seed": seed, "profile": "batch", "submissions": sorted(digests or {}),
            "submission_digests": dict(digests or {}),
            "fingerprints": {"grader": {"checks/values.py": grader, "runner.py": "x"},
                             "challenges": {"rms_norm": {"spec": "s1", "reference": reference,
                                                         "checks": checks, "questions": {"q1": "k1"}}}}}


def write_previous(folder, reports):
    folder.mkdir(exist_ok=True)
    for r in reports:
        (folder / f"{r.student}.json").write_text(json.dumps(r.to_dict()))


BEFORE = {"a": {"eps": True, "bf16": True, "q1": True},
          "b": {"eps": True, "bf16": False, "q1": True},
          "c": {"eps": False, "bf16": False, "q1": False}}


def test_a_one_check_spec_change_names_exactly_the_students_and_checks_it_moved(tmp_path):
    prev = tmp_path / "prev"
    write_previous(prev, [report(n, v) for n, v in BEFORE.items()])
    digests = {n: f"d{n}" for n in BEFORE}
    old_run = run({"eps": "e1", "bf16": "b1"}, digests=digests)
    new_run = run({"eps": "e1", "bf16": "b2"}, digests=digests)
    after = {**BEFORE, "b": {**BEFORE["b"], "bf16": True}, "c": {**BEFORE["c"], "bf16": True}}
    result = cmp.compare(previous_dir=prev, previous_run=old_run, current_run=new_run,
                         current=[(n, report(n, v)) for n, v in after.items()])
    assert [(s.name, [(c.challenge, c.check) for c in s.checks]) for s in result.changes] == \
        [("b", [("rms_norm", "bf16")]), ("c", [("rms_norm", "bf16")])]
    assert result.changes[0].checks[0].why == ["the spec of rms_norm/bf16 changed"]
    assert result.changes[0].direction == "up" and result.unchanged == 1
    assert result.run_differences == ["rms_norm: checks changed: bf16"]
    assert result.reasons() == {"the spec of rms_norm/bf16 changed": 2}


def test_each_recorded_difference_is_a_reason(tmp_path):
    prev = tmp_path / "prev"
    write_previous(prev, [report("a", BEFORE["a"])])
    old_run = run({"eps": "e1", "bf16": "b1"}, digests={"a": "d1"})
    new_run = run({"eps": "e1", "bf16": "b1"}, grader="g2", reference="r2", digests={"a": "d2"}, seed=1)
    result = cmp.compare(previous_dir=prev, previous_run=old_run, current_run=new_run,
                         current=[("a", report("a", {**BEFORE["a"], "eps": False}))])
    (change,) = result.changes
    why = change.checks[0].why
    assert why[0] == "the submission changed" and "the reference code rms_norm uses changed" in why
    assert "grader code changed: checks/values.py" in why and "the seed changed (0 -> 1)" in why
    # nothing recorded differs: the audit says so instead of guessing
    same = cmp.compare(previous_dir=prev, previous_run=old_run, current_run=old_run,
                       current=[("a", report("a", {**BEFORE["a"], "eps": False}))])
    assert same.changes[0].checks[0].why[0].startswith("nothing recorded changed")


def test_no_lowering_keeps_the_higher_grade_and_says_so(tmp_path):
    prev = tmp_path / "prev"
    write_previous(prev, [report(n, v) for n, v in BEFORE.items()])
    r = run({"eps": "e1", "bf16": "b1"})
    rows = [("a", report("a", {**BEFORE["a"], "eps": False})), ("b", report("b", {**BEFORE["b"], "bf16": True})),
            ("new", report("new", BEFORE["a"]))]
    result = cmp.compare(previous_dir=prev, previous_run={**r, "submissions": sorted(BEFORE)}, current_run=r,
                         current=rows, no_lowering=True)
    directions = {c.name: c.direction for c in result.changes}
    assert directions == {"a": "down", "b": "up", "new": "added", "c": "removed"}
    assert result.kept == ["a"] and "kept the previous grade for 1" in result.summary()
    book = dict((n, rep.score) for n, rep in cmp.gradebook_rows(rows, result, previous_dir=prev))
    assert book == {"a": 3.0, "b": 3.0, "new": 3.0}
    table = list(csv.DictReader(io.StringIO(cmp.comparison_csv(result))))
    assert [(t["name"], t["kept_previous"]) for t in table] == [("a", "yes"), ("b", ""), ("c", ""), ("new", "")]


def test_one_check_edit_changes_only_that_checks_digest():
    from helpers import catalogue

    from validator import paths

    challenge = catalogue()["rms_norm"]  # shared with the other tests of this process
    before = cmp.challenge_digests(challenge, reference_file=paths.reference_dir() / "layers.py", key={})
    edited = challenge.model_copy(deep=True)
    edited.checks[0].points = edited.checks[0].points + 1
    edited.checks[1].title = "a new title changes no verdict"
    after = cmp.challenge_digests(edited, reference_file=paths.reference_dir() / "layers.py", key={})
    changed = [c for c in before["checks"] if before["checks"][c] != after["checks"][c]]
    assert changed == [challenge.checks[0].id] and before["spec"] == after["spec"]
    assert cmp.submission_digest({"layers.py": "x"}, b"a: 1") != cmp.submission_digest({"layers.py": "x"}, None)


def test_a_previous_run_is_read_from_its_shards(tmp_path):
    (tmp_path / "shards").mkdir()
    for i, names in ((1, ["a"]), (2, ["b"])):
        (tmp_path / "shards" / f"shard-{i}-of-2.json").write_text(json.dumps(
            {"shard": i, "shards": 2, "seed": 0, "profile": "batch", "submissions": names,
             "submission_digests": {n: "d" for n in names}}))
    combined = cmp.load_run(tmp_path)
    assert combined["submissions"] == ["a", "b"] and combined["submission_digests"] == {"a": "d", "b": "d"}
    rep = report("a", BEFORE["a"])
    assert report_from_dict(rep.to_dict()).score == rep.score


def test_cli_has_the_class_options():
    args = build_parser().parse_args(["grade", "subs", "--out", "o", "--compare", "old", "--no-lowering",
                                      "--boilerplate", "stub.py", "--boilerplate", "lib/", "--public-solutions", "pub",
                                      "--signatures", "s.json"])
    assert (args.compare, args.no_lowering, args.boilerplate, args.public_solutions, args.signatures) == \
        ("old", True, ["stub.py", "lib/"], "pub", "s.json")
    merged = build_parser().parse_args(["merge", "a", "--out", "m"])
    assert merged.no_lowering is None and merged.compare is None  # the shards' own, unless given
    sig = build_parser().parse_args(["signatures", "--challenge", "rms_norm", "--strength"])
    assert sig.challenges == ["rms_norm"] and sig.strength
    assert sig.seed is None  # then `validator grade`'s own default: patterns recorded on another seed may not match
