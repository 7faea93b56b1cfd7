"""The class dashboard from small synthetic reports (no grading): failure patterns named by known bugs'
signatures, check rates, questions' wrong answers, init overlays, and a page that escapes students' text."""

from __future__ import annotations

import io
import json
import re

import pytest

from validator.batch import dashboard
from validator.batch.signatures import Bug, Signatures, affected_challenges, cluster, docstring_name, load, lost_checks
from validator.reporters.dashboard import render_dashboard
from validator.results import ChallengeResult, CheckResult, Histogram, Report

CHECKS = ("matches_reference", "bf16_accuracy", "fp16_accuracy", "custom_eps", "gain_starts_at_one")


def student(name: str, lost: dict[str, tuple[str, ...]], *, answer: str | None = "b", init_counts=None) -> tuple:
    """A report whose checks of each challenge pass except those named in ``lost``."""
    challenges = []
    for cid, checks in (("rms_norm", CHECKS), ("transformer_block", ("matches_reference", "wiring"))):
        results = []
        for c in checks:
            bad = c in lost.get(cid, ())
            figures = []
            if c == "gain_starts_at_one" and init_counts is not None:
                figures = [Histogram(title="weight", edges=[0.0, 1.0, 2.0, 3.0], counts=list(init_counts),
                                     expected=[0.25, 0.5, 0.25])]
            results.append(CheckResult(id=c, kind="init" if figures else "values", status="failed" if bad else "passed",
                                       score=0.0 if bad else 1.0, max_score=1.0, figures=figures))
        if cid == "rms_norm":
            message = ("not answered: add it" if answer is None else "correct" if answer == "b"
                       else f"you chose {answer}, the answer is b")
            results.append(CheckResult(id="q_norm", kind="question", status="passed" if answer == "b" else "failed",
                                       score=1.0 if answer == "b" else 0.0, max_score=1.0, message=message,
                                       title="which norm?"))
        challenges.append(ChallengeResult(id=cid, title=cid, checks=results))
    return name, Report(challenges=challenges, seed=0, student=name, profile="batch")


UPCAST = ("bf16_accuracy", "fp16_accuracy")
SIGS = Signatures(bugs=[
    Bug(id="library:rms_norm/no_float32_upcast", source="library", challenge="rms_norm",
        name="no float32 upcast", lost={"rms_norm": list(UPCAST), "transformer_block": ["matches_reference"]}),
    Bug(id="strength:rms_norm/x", source="strength", challenge="rms_norm", name="a one-point mutant",
        lost={"rms_norm": list(UPCAST)}),
    Bug(id="library:rms_norm/eps_a", source="library", challenge="rms_norm", name="eps bug A",
        lost={"rms_norm": ["custom_eps"]}),
    Bug(id="library:rms_norm/eps_b", source="library", challenge="rms_norm", name="eps bug B",
        lost={"rms_norm": ["custom_eps"]}),
    Bug(id="library:rms_norm/big", source="library", challenge="rms_norm", name="wrong axis",
        lost={"rms_norm": ["matches_reference", "bf16_accuracy", "fp16_accuracy", "custom_eps"]}),
])


def make_class() -> list[tuple]:
    knock = {"transformer_block": ("matches_reference",)}
    return ([student(f"ok{i}", {}) for i in range(3)]
            + [student(f"up{i}", {"rms_norm": UPCAST, **knock}, answer="c") for i in range(4)]
            + [student(f"eps{i}", {"rms_norm": ("custom_eps",)}, answer=None) for i in range(2)]
            + [student("odd", {"rms_norm": ("matches_reference", "bf16_accuracy", "fp16_accuracy")}, answer="d")])


def test_lost_checks_reads_dicts_and_results_alike():
    name, report = student("s", {"rms_norm": ("custom_eps",)})
    assert lost_checks(report.challenges[0]) == ("custom_eps",)
    assert lost_checks(report.to_dict()["challenges"][0]) == ("custom_eps",)
    # a question, a skipped check or a failure worth nothing is not a lost code check
    ch = ChallengeResult(id="c", title="c", checks=[
        CheckResult(id="q", kind="question", status="failed", score=0, max_score=1),
        CheckResult(id="s", kind="values", status="skipped", score=0, max_score=1),
        CheckResult(id="a", kind="values", status="failed", score=0, max_score=0),
        CheckResult(id="e", kind="values", status="error", score=0, max_score=2)])
    assert lost_checks(ch) == ("e",)


def test_patterns_are_named_by_the_bug_that_loses_exactly_those_checks():
    patterns = {(p.challenge, p.lost): p for p in cluster(make_class(), SIGS)}
    upcast = patterns[("rms_norm", tuple(sorted(UPCAST)))]
    assert upcast.count == 4 and upcast.relation == "own"
    # named by the mutant library's bug; the strength mutant that fails the same checks is listed after it
    assert upcast.name == "no float32 upcast" and [b.source for b in upcast.bugs] == ["library", "strength"]
    knock = patterns[("transformer_block", ("matches_reference",))]
    assert knock.relation == "knock-on" and knock.count == 4 and "bug in rms_norm" in knock.name
    eps = patterns[("rms_norm", ("custom_eps",))]
    assert eps.count == 2 and "eps bug A" in eps.name and "eps bug B" in eps.name
    odd = patterns[("rms_norm", ("bf16_accuracy", "fp16_accuracy", "matches_reference"))]
    assert odd.relation == "unnamed" and odd.submissions == ["odd"]
    assert odd.near and odd.near[0][1].name == "wrong axis"  # 3 of its 4 checks
    # largest first; correct submissions make no pattern
    assert [p.count for p in cluster(make_class(), SIGS)] == sorted((p.count for p in patterns.values()), reverse=True)
    assert not any("ok0" in p.submissions for p in patterns.values())


def test_without_signatures_every_pattern_is_unnamed():
    patterns = cluster(make_class(), None)
    assert patterns and all(p.relation == "unnamed" and p.name.startswith("unnamed pattern") for p in patterns)


def test_signatures_round_trip_and_refuse_a_bad_file(tmp_path):
    path = tmp_path / "signatures.json"
    path.write_text(json.dumps(SIGS.to_dict()))
    again = load(path)
    assert [b.id for b in again.bugs] == [b.id for b in SIGS.bugs] and set(again.index()) == set(SIGS.index())
    assert load(tmp_path / "absent.json") is None
    path.write_text('{"format": 99}')
    with pytest.raises(ValueError, match="validator signatures"):
        load(path)


def test_a_bug_affects_its_challenge_and_those_built_on_it():
    source = "class Norm:\n    pass\n\nclass Block:\n    def f(self):\n        return Norm()\n\nclass Other:\n    pass\n"

    class Ch:
        def __init__(self, *entries):
            self.entries = list(entries)

    catalogue = {"norm": Ch("Norm"), "block": Ch("Block"), "other": Ch("Other")}
    assert affected_challenges(source, catalogue, "norm", {"Norm"}) == ["norm", "block"]
    assert affected_challenges(source, catalogue, "other", {"Other"}) == ["other"]
    assert docstring_name('"""Drops the gain.\n\nMore."""\nx = 1\n', "gain_dropped") == "Drops the gain."
    assert docstring_name("x = 1\n", "gain_dropped") == "gain dropped"


def test_dashboard_data_counts_checks_questions_and_init_overlays():
    rows = make_class()
    rows[0] = student("ok0", {}, init_counts=[1, 2, 1])
    rows[3] = student("up0", {"rms_norm": UPCAST + ("gain_starts_at_one",)}, answer="c", init_counts=[0, 0, 4])
    data = dashboard.build(rows, order=["rms_norm", "transformer_block"], signatures=SIGS)
    rates = {(c["challenge"], c["check"]): c for c in data["checks"]}
    assert rates[("rms_norm", "bf16_accuracy")]["lost"] == 5 and rates[("rms_norm", "bf16_accuracy")]["graded"] == 10
    assert rates[("rms_norm", "bf16_accuracy")]["examples"] == ["odd", "up0", "up1", "up2", "up3"]
    (q,) = data["questions"]
    assert (q["correct"], q["unanswered"], q["key"]) == (3, 2, "b")
    assert q["wrong"] == [{"answer": "c", "count": 4}, {"answer": "d", "count": 1}]
    (fig,) = data["init"]
    assert fig["graded"] == 2 and fig["failed"] == 1 and fig["class_counts"] == [1, 2, 5]
    assert fig["students"][0]["name"] == "up0"  # failing ones drawn first
    assert data["scores"]["total"]["n"] == 10 and data["scores"]["total"]["full"] == 3
    json.dumps(data)  # plain data


def test_page_is_self_contained_and_escapes_student_text():
    rows = make_class() + [student('<script>alert("x")</script>', {"rms_norm": ("custom_eps",)}, answer="<img src=x>")]
    page = render_dashboard(dashboard.build(rows, order=["rms_norm", "transformer_block"], signatures=SIGS))
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched
    assert "no float32 upcast" in page and "knock-on" in page
    assert 'href="html/up0.html"' in page and "%3Cscript%3E" in page  # links to the submissions' own pages


# -- on the batch tests' graded run (graded once per session by tests/test_batch.py's fixture) -------------
from test_batch import graded  # noqa: E402,F401 - the shared fixture: no grading of its own here


def test_a_graded_run_writes_the_class_view_and_a_regrade_audit_finds_nothing_moved(graded, tmp_path):  # noqa: F811
    from validator.batch import merge as batch_merge

    base, _ = graded
    whole = json.loads((base / "whole" / "dashboard.json").read_text())
    assert any("bob" in p["submissions"] for p in whole["patterns"])  # clamped ids: a pattern of its own
    top = whole["similarity"]["pairs"][0]  # alice and =dave handed in the same file
    assert {top["a"], top["b"]} == {"alice", "=dave"} and top["score"] == 1.0 and whole["similarity"]["views"]
    page = (base / "whole" / "dashboard.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    # the whole run merged again as its own one shard, audited against itself (merge alone: no grading)
    stream = io.StringIO()
    assert batch_merge.main(shard_dirs=[base / "whole"], out=tmp_path / "again", compare=base / "whole",
                            no_lowering=True, stream=stream) == 0, stream.getvalue()
    audit = json.loads((tmp_path / "again" / "compare.json").read_text())
    assert (audit["changed"], audit["unchanged"], audit["kept_previous"]) == (0, 5, []), audit
    assert audit["run_differences"] == []


@pytest.mark.thorough  # the sharded run and its merge exist in the thorough tier only (see test_batch's fixture)
def test_merge_rebuilds_the_class_view_and_a_regrade_audit_finds_nothing_moved(graded, tmp_path):  # noqa: F811
    from validator.batch import merge as batch_merge

    base, result = graded
    assert result["merge"][0] == 0, result["merge"][1]
    whole = json.loads((base / "whole" / "dashboard.json").read_text())
    merged = json.loads((base / "merged" / "dashboard.json").read_text())
    assert (base / "sharded" / "dashboard-1-of-2.html").is_file() and (base / "merged" / "run.json").is_file()
    assert [(p["challenge"], p["lost"], p["submissions"]) for p in whole["patterns"]] == \
        [(p["challenge"], p["lost"], p["submissions"]) for p in merged["patterns"]]
    # a regrade with nothing changed: the audit finds no moved verdict (merge alone: no grading)
    stream = io.StringIO()
    assert batch_merge.main(shard_dirs=[base / "sharded"], out=tmp_path / "again", compare=base / "whole",
                            no_lowering=True, stream=stream) == 0, stream.getvalue()
    audit = json.loads((tmp_path / "again" / "compare.json").read_text())
    assert (audit["changed"], audit["unchanged"], audit["kept_previous"]) == (0, 5, []), audit
    assert audit["run_differences"] == []


@pytest.mark.thorough  # generates the mutants and fingerprints the challenge twice: a few seconds
def test_strength_mutants_caught_with_all_checks_become_signatures(tmp_path):
    from helpers import catalogue

    from validator import paths
    from validator.batch.signatures import strength_bugs
    from validator.instructor.fixtures import fingerprint
    from validator.instructor.mutants import generate
    from validator.instructor.strength import mutant_key

    softmax = catalogue()["softmax"]
    reference = paths.reference_dir() / "layers.py"
    first, second = generate(reference.read_text(), softmax.entries)[:2]
    fp = fingerprint(softmax, reference_file=reference)
    for mutant, caught, all_checks in ((first, ["matches_reference", "gradient"], True),
                                       (second, ["matches_reference"], False)):  # fail-fast: not a kill matrix
        key = mutant_key(mutant, fingerprint=fp, seed=0, profile="batch", all_checks=all_checks)
        (tmp_path / f"{key}.json").write_text(json.dumps({"mutant": mutant.id, "caught_by": caught}))
    (bug,) = strength_bugs([softmax], seed=0, profile="batch", cache_dir=tmp_path)
    assert bug.id == f"strength:softmax/{first.id}" and bug.lost == {"softmax": ["gradient", "matches_reference"]}
    assert bug.name.startswith(first.qualname) and first.original_line in bug.name
