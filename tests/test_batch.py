"""`validator grade` and `validator merge`: discovery, shards, outputs, determinism, exit status."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from validator.api import UsageError
from validator.batch import grade as batch_grade
from validator.batch import merge as batch_merge
from validator.batch.progress import Progress, printable
from validator.batch.slot import safe_answers, scrub
from validator.batch.submissions import Shard, discover, parse_shard
from validator.cli import build_parser
from validator.reference_side import OFFICIAL_SEED

ROOT = Path(__file__).resolve().parents[1]
IMPL = ROOT / "tests" / "implementations" / "token_embedding"
CHALLENGE = "token_embedding"


# -- units -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,expected", [(None, Shard(1, 1)), ("2/4", Shard(2, 4)), (" 1 / 1 ", Shard(1, 1))])
def test_parse_shard(text, expected):
    assert parse_shard(text) == expected


@pytest.mark.parametrize("text", ["0/4", "5/4", "1-4", "a/b", "/3"])
def test_parse_shard_rejects(text):
    with pytest.raises(UsageError):
        parse_shard(text)


def test_shards_are_disjoint_and_cover_everything(tmp_path):
    for i in range(7):
        (tmp_path / f"s{i}").mkdir()
    subs = discover(tmp_path)
    parts = [Shard(i, 3).select(subs) for i in (1, 2, 3)]
    names = [s.name for part in parts for s in part]
    assert sorted(names) == [s.name for s in subs] and len(names) == len(set(names))


def test_discover_refuses_a_folder_whose_report_would_overwrite_the_batch_outputs(tmp_path):
    for name in ("alice", "dashboard", "run"):
        (tmp_path / name).mkdir()
    with pytest.raises(UsageError, match=r"dashboard, .*run: a submission's report is written as NAME.json"):
        discover(tmp_path)


def test_discover_skips_hidden_folders_and_files(tmp_path):
    for name in ("bob", "alice", ".git", "__MACOSX_not_hidden"):
        (tmp_path / name).mkdir()
    (tmp_path / "notes.txt").write_text("x")
    assert [s.name for s in discover(tmp_path)] == ["__MACOSX_not_hidden", "alice", "bob"]
    with pytest.raises(UsageError):
        discover(tmp_path / "missing")


def test_submission_files_refuse_symlinks(tmp_path):
    sub = tmp_path / "s"
    sub.mkdir()
    (sub / "layers.py").symlink_to(ROOT / "reference" / "layers.py")
    (sub / "helpers.py").write_text("X = 1\n")
    (sub / "data.bin").write_bytes(b"\0")
    files = discover(tmp_path)[0].files()
    assert files == {"helpers.py": str(sub / "helpers.py")}


def test_answers_aliases_and_non_scalars_are_refused(tmp_path):
    from validator.questions import AnswersError

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("token_embedding:\n  a: &a [1, 2]\n  q: *a\n")
    with pytest.raises(AnswersError, match="aliases"):
        safe_answers(bomb, [])
    odd = tmp_path / "odd.yaml"
    odd.write_text("token_embedding:\n  q1: [1, 2]\n  q2: 3\n")
    notes: list[str] = []
    assert safe_answers(odd, notes) == {"token_embedding": {"q1": None, "q2": 3}}
    assert "q1" in notes[0]


def test_scrub_and_printable_neutralise_student_text():
    assert scrub({"m": ["a\ud800b"]}) == {"m": ["a\ufffdb"]}
    nan = float("nan")  # the same object on both sides: lists compare it by identity first
    assert scrub({"k\udfff": 1, "n": [nan, None, {"x": "ok"}]}) == {"k\ufffd": 1, "n": [nan, None, {"x": "ok"}]}
    assert scrub({1: ["\ud83d"], "o": object}) == {1: ["\ufffd"], "o": object}  # what JSON cannot write: walked too
    clean = {"m": ["plain", "caf\u00e9 \U0001f600"], "n": 1.5}
    assert scrub(clean) is clean  # nothing to replace: handed on as it is
    assert printable("\x1b[2Jname\n") == "\\x1b[2Jname\\n"  # shown as escapes, never acted on


def test_plain_progress_has_an_eta():
    stream = io.StringIO()
    progress = Progress(3, stream=stream, live=False)
    progress.advance("alice", "3/4 in 1.0 s")
    progress.advance("bob", "4/4 in 1.0 s")
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("[1/3] alice: 3/4") and "eta" in lines[0]


def test_cli_has_grade_and_merge():
    args = build_parser().parse_args(["grade", "subs", "--out", "o", "--challenge", "a", "--challenge", "b",
                                      "--workers", "3", "--timeout", "5", "--memory", "256", "--shard", "1/2"])
    assert (args.submissions, args.out, args.challenges, args.workers, args.timeout, args.memory, args.shard) == \
        ("subs", "o", ["a", "b"], 3, 5.0, 256, "1/2")
    args = build_parser().parse_args(["merge", "a", "b", "--out", "m"])
    assert args.shard_dirs == ["a", "b"] and args.out == "m"


@pytest.mark.parametrize("kwargs", [dict(submissions="/nonexistent"), dict(challenges=["no_such_challenge"]),
                                    dict(shard="3/2"), dict(timeout=0)])
def test_usage_errors_exit_2(tmp_path, kwargs):
    args = {"submissions": str(tmp_path), "out": str(tmp_path / "out"), **kwargs}
    stream = io.StringIO()
    assert batch_grade.main(stream=stream, **args) == 2
    assert stream.getvalue().startswith("error:")


def _fake_shard(folder: Path, index: int, count: int, names: list[str], seed: int = 0) -> None:
    (folder / "shards").mkdir(parents=True, exist_ok=True)
    (folder / "shards" / f"shard-{index}-of-{count}.json").write_text(json.dumps(
        {"shard": index, "shards": count, "seed": seed, "profile": "batch", "challenges": ["c"],
         "submissions": names, "grader_failures": []}))
    for name in names:
        (folder / f"{name}.json").write_text(json.dumps(
            {"score": 1, "max_score": 2, "seed": seed, "student": name, "profile": "batch", "challenges": [
                {"id": "c", "title": "C", "problem": None, "checks": [
                    {"id": "x", "kind": "shape", "status": "passed", "score": 1, "max_score": 2}]}]}))


def test_merge_refuses_missing_and_mismatched_shards(tmp_path):
    _fake_shard(tmp_path / "a", 1, 3, ["ann"])
    _fake_shard(tmp_path / "b", 2, 3, ["ben"])
    stream = io.StringIO()
    assert batch_merge.main(shard_dirs=[tmp_path / "a", tmp_path / "b"], out=tmp_path / "m", stream=stream) == 1
    assert "shard(s) 3 of 3 missing" in stream.getvalue()
    assert batch_merge.main(shard_dirs=[tmp_path / "a", tmp_path / "b"], out=tmp_path / "m",
                            allow_missing=True, stream=stream) == 1
    assert (tmp_path / "m" / "grades.csv").read_text().splitlines()[1:] == ["ann,1,2,1,", "ben,1,2,1,"]  # the last column: review reasons (none)
    _fake_shard(tmp_path / "c", 3, 3, ["cat"], seed=5)
    assert batch_merge.main(shard_dirs=[tmp_path / "a", tmp_path / "b", tmp_path / "c"], out=tmp_path / "m",
                            stream=stream) == 2
    assert "seed" in stream.getvalue()


# -- end to end --------------------------------------------------------------------------------------
def _make_submissions(folder: Path) -> None:
    for name, source in (("alice", IMPL / "correct" / "indexing.py"), ("bob", IMPL / "broken" / "ids_clamped.py"),
                         ("carol", IMPL / "broken" / "init_zeros.py"), ("=dave", IMPL / "correct" / "indexing.py")):
        (folder / name).mkdir(parents=True)
        shutil.copy(source, folder / name / "layers.py")
    (folder / "=dave" / "answers.yaml").write_text("token_embedding: [not, a, mapping\n")
    (folder / "erin").mkdir()
    (folder / "erin" / "answers.yaml").write_text("token_embedding:\n  some_question: 42\n")


def _grade(subs: Path, out: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "validator", "grade", str(subs), "--out", str(out),
                             "--challenge", CHALLENGE, "--timeout", "120", *extra],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    """One whole run; with --thorough also a two-shard run beside it (in parallel, as a job array would), then a
    merge; once per session. The default tier skips the shards: two more runs, and `merge` has unit tests above."""
    thorough = request.config.getoption("--thorough")
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, shared by its xdist workers
    base = shared / "batch-e2e"
    with open(shared / "batch-e2e.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (base / "result.json").exists():
            shutil.rmtree(base, ignore_errors=True)
            _make_submissions(base / "subs")
            runs = [_grade(base / "subs", base / "whole", "--workers", "1")]
            if thorough:
                runs += [_grade(base / "subs", base / "sharded", "--workers", "1", "--shard", f"{i}/2")
                         for i in (1, 2)]
            results = [(p.wait(timeout=600), p.stderr.read()) for p in runs]
            merge = None
            if thorough:
                merged = subprocess.run([sys.executable, "-m", "validator", "merge", str(base / "sharded"), "--out",
                                         str(base / "merged")], cwd=ROOT, capture_output=True, text=True)
                merge = [merged.returncode, merged.stderr]
            (base / "result.json").write_text(json.dumps({"runs": results[:1], "shard_runs": results[1:],
                                                          "merge": merge}))
    return base, json.loads((base / "result.json").read_text())


def test_grading_completes_with_status_0(graded):
    _, result = graded
    for code, stderr in result["runs"]:
        assert code == 0, stderr[-3000:]


@pytest.mark.thorough
def test_sharded_grading_and_merge_complete_with_status_0(graded):
    _, result = graded
    assert len(result["shard_runs"]) == 2
    for code, stderr in result["shard_runs"]:
        assert code == 0, stderr[-3000:]
    assert result["merge"][0] == 0, result["merge"][1]


def test_outputs_per_submission(graded):
    from tests.test_reporters_batch import GRADESCOPE_SCHEMA

    base, _ = graded
    out = base / "whole"
    for name in ("alice", "bob", "carol", "=dave", "erin"):
        report = json.loads((out / f"{name}.json").read_text())
        assert report["student"] == name and report["profile"] == "batch" and report["seed"] == OFFICIAL_SEED
        jsonschema.validate(json.loads((out / "gradescope" / name / "results.json").read_text()), GRADESCOPE_SCHEMA)
        root = ET.parse(out / "junit" / f"{name}.xml").getroot()
        assert root.tag == "testsuites" and root.find("testsuite").get("name") == CHALLENGE
        page = (out / "html" / f"{name}.html").read_text()
        assert page.startswith("<!DOCTYPE html>") and f"validator report: {name}" in page and "<script" not in page
        assert all(c["id"] in page for ch in report["challenges"] for c in ch["checks"])
    erin = json.loads((out / "erin.json").read_text())
    assert "no layers.py" in erin["notes"][0]
    assert all(c["status"] == "error" for c in erin["challenges"][0]["checks"] if c["kind"] != "question")
    dave = json.loads((out / "=dave.json").read_text())
    assert any("answers.yaml ignored" in n for n in dave["notes"])


def test_gradebook(graded):
    base, _ = graded
    rows = list(csv.DictReader((base / "whole" / "grades.csv").open()))
    assert [r["name"] for r in rows] == ["'=dave", "alice", "bob", "carol", "erin"]
    scores = {r["name"]: float(r["score"]) for r in rows}
    assert scores["alice"] == scores["'=dave"] > scores["bob"] > 0 and scores["carol"] < scores["alice"]
    assert all(r["max_score"] == rows[0]["max_score"] and r[CHALLENGE] == r["score"] for r in rows)
    # alice and =dave hand in the same file to one slot: the second is compared with remembered reference results
    alice, dave = (json.loads((base / "whole" / f"{n}.json").read_text()) for n in ("alice", "=dave"))
    assert _verdicts(alice) == _verdicts(dave)


def _verdicts(report: dict) -> list:
    return [(c["id"], c["status"], c["score"], c["message"] if c["kind"] != "performance" else "")
            for ch in report["challenges"] for c in ch["checks"]]


@pytest.mark.thorough
def test_shards_merge_to_the_same_grades_deterministically(graded):
    base, _ = graded
    assert (base / "merged" / "grades.csv").read_text() == (base / "whole" / "grades.csv").read_text()
    for name in ("alice", "bob", "carol", "=dave", "erin"):
        whole = json.loads((base / "whole" / f"{name}.json").read_text())
        shard = json.loads((base / "merged" / f"{name}.json").read_text())
        assert _verdicts(whole) == _verdicts(shard)
        assert (base / "merged" / "junit" / f"{name}.xml").is_file()
        # the shard's own page, carried over (timings differ from the whole run's, verdicts do not)
        assert (base / "merged" / "html" / f"{name}.html").read_text() == \
            (base / "sharded" / "html" / f"{name}.html").read_text()
    manifests = sorted(p.name for p in (base / "sharded" / "shards").iterdir())
    assert manifests == ["shard-1-of-2.json", "shard-2-of-2.json"]


@pytest.mark.skipif(os.geteuid() != 0, reason="worker uids need root")
def test_no_worker_process_survives(graded):
    from validator.sandbox import processes_of

    base, _ = graded
    for folder in ("whole", "sharded") if (base / "sharded").is_dir() else ("whole",):
        for manifest in (base / folder / "shards").iterdir():
            for uid in json.loads(manifest.read_text())["worker_uids"]:
                assert processes_of(uid) == []


# -- slots kept on a CPU each ------------------------------------------------------------------------
def test_slots_are_kept_on_a_cpu_each_only_when_they_fill_the_cpus(monkeypatch):
    from validator.batch.pool import slot_cpus

    assert slot_cpus(2, [0, 1]) == [0, 1]
    assert slot_cpus(2, [3, 5]) == [3, 5]
    assert slot_cpus(1, [0, 1]) == [None]  # a CPU to spare: the scheduler may move the slot off a busy one
    assert slot_cpus(3, [0, 1]) == [None, None, None]  # more slots than CPUs: the scheduler balances them
    assert slot_cpus(2, []) == [None, None]  # the platform cannot say
    monkeypatch.setenv("VALIDATOR_PIN_SLOTS", "0")
    assert slot_cpus(2, [0, 1]) == [None, None]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this platform")
def test_a_pools_slots_and_their_workers_run_on_their_own_cpu():
    """Each slot process is kept on its CPU from the start, so the worker template it forks (and every worker)
    inherits it; a slot that replaces another takes a CPU no live slot holds."""
    from validator.batch.pool import Pool, usable_cpus

    cpus = usable_cpus()
    pool = Pool({"challenges": []}, workers=len(cpus), watchdog_s=60)
    try:
        pool.start(len(cpus))
        assert sorted(s.cpu for s in pool.slots) == cpus
        for slot in pool.slots:
            assert os.sched_getaffinity(slot.proc.pid) == {slot.cpu}
        gone = pool.slots.pop(0)
        gone.stop(force=True)
        pool._add_slot()
        assert pool.slots[-1].cpu == gone.cpu and os.sched_getaffinity(pool.slots[-1].proc.pid) == {gone.cpu}
    finally:
        pool.close()


def test_a_slot_freezes_its_heap_after_each_submission_and_collects_its_garbage_first():
    """What a submission leaves alive in a slot is frozen out of the cyclic collector's sight after it
    (validator.batch.slot.settle_heap), in the slot's process; its cyclic garbage is collected first, not frozen."""
    script = ("import gc, weakref\nfrom validator import lifetime\nfrom validator.batch import slot\n"
              "lifetime.SHORT_LIVED = True  # as the slot's process marks itself\n"
              "assert gc.get_freeze_count() == 0\nslot.settle_heap()\nfrozen = gc.get_freeze_count()\n"
              "class Node: pass\nkept = [[i] for i in range(1000)]\n"
              "a, b = Node(), Node(); a.b, b.a = b, a; gone = weakref.ref(a); del a, b\n"
              "slot.settle_heap()\nassert gone() is None, 'cyclic garbage was frozen'\n"
              "assert frozen > 0 and gc.get_freeze_count() >= frozen + 1000, (frozen, gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_command_keeps_what_lives_out_of_full_collections_only_when_short_lived():
    """`validator grade`'s own process freezes its heap before grading and after each submission (the reports
    kept for the class outputs are not walked again by every full collection); a host that lives on, such as
    this test session, is left alone."""
    script = ("import gc\nfrom validator import lifetime\n"
              "lifetime.freeze_heap(collect=1)\nassert gc.get_freeze_count() == 0\n"
              "lifetime.SHORT_LIVED = True\nlifetime.freeze_heap(collect=1)\nfirst = gc.get_freeze_count()\n"
              "kept = [[i] for i in range(1000)]\nlifetime.freeze_heap(collect=1)\n"
              "assert 0 < first and gc.get_freeze_count() >= first + 1000, (first, gc.get_freeze_count())\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
