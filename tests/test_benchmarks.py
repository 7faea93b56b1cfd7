"""The profiling benchmark accounts for a submission's every check and call, and leaves the grader as it was."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_where_time_goes_counts_every_check_and_call_of_a_graded_submission(tmp_path):
    from validator import grading, paths
    from validator.spec import load_catalogue
    from validator.worker import client

    bench = _load("where_time_goes")
    shutil.copy(ROOT / "reference" / "layers.py", tmp_path / "layers.py")
    before = (client.Worker._roundtrip, client.Worker.close, grading.run_check)
    m = bench.measure(tmp_path, repeat=1, challenges=["softmax"], isolate=False)
    assert (client.Worker._roundtrip, client.Worker.close, grading.run_check) == before
    challenge = load_catalogue(paths.challenges_dir())["softmax"]
    assert sum(n for n, *_ in m["by_test"].values()) == len(challenge.checks)
    assert {test for test, row in m["by_test"].items() if row[0]} == {c.test for c in challenge.checks}
    calls = sum(row[3] for row in m["by_test"].values())
    assert calls > len(challenge.checks) and m["grader"] > 0 and m["wall"] > 0
    assert 0 < m["score"][0] <= m["score"][1]
    text = bench.render(m)
    assert "1 challenge," in text and f"{calls:.0f} calls" in text


def test_where_time_goes_grades_different_submissions_of_a_class(tmp_path, capsys):
    """`--class N`: N different submissions after a warm-up, as a class costs (the same file graded again finds
    its source scans already done)."""
    import gc

    bench = _load("where_time_goes")
    frozen = gc.get_freeze_count()
    assert bench.main(["--class", "2", "--challenges", "softmax", "--no-isolate"]) == 0
    assert gc.get_freeze_count() == frozen  # a host that lives on (this session) keeps its heap unfrozen
    text = capsys.readouterr().out
    assert text.startswith("2 different submissions of a generated class, 1 challenge, in a warm slot")
    assert "forbidden_source" in text


def test_where_time_goes_floor_runs_the_calls_a_grading_sent(tmp_path, capsys):
    """`--floor`: the calls the last submission's grading sent, run again in-process, timed apart from it."""
    bench = _load("where_time_goes")
    assert bench.main(["--class", "1", "--challenges", "softmax", "--no-isolate", "--floor"]) == 0
    text = capsys.readouterr().out
    line = next(line for line in text.splitlines() if "floor:" in line)
    calls = int(line.split("submission's ")[1].split()[0])
    assert calls > 0 and f"{calls} calls of the student's code" in text
    total = float(line.split("wire): ")[1].split()[0])
    assert total > 0
    # per test: the calls as the checks asked for them (no rehearsal batch counted under an earlier check)
    rows = text.split("the floor by test")[1].splitlines()[2:]
    by_test = {row.split()[0]: (int(row.split()[1]), float(row.split()[2])) for row in rows if row.strip()}
    assert sum(n for n, _ in by_test.values()) == calls
    assert by_test["values"][0] > 0 and "forbidden_runtime" in by_test and "forbidden_source" not in by_test
    # parts of the total, as printed: each to 3 decimals (a softmax-only floor is a few ms)
    assert sum(seconds for _, seconds in by_test.values()) <= total + 0.0005 * (1 + len(by_test))


def test_bench_wire_moves_a_class_submissions_replies_through_a_reply_channel(capsys):
    """The wire benchmark's replies reach the reader whole (a Reader refuses a short or forged one), and it prints
    both paths' CPU and their ratio."""
    bench = _load("bench_wire")
    messages = bench.replies(count=12)
    assert bench.replies(count=12)[5]["output"].shape == messages[5]["output"].shape  # the same every run
    writer, reader = bench._run(messages, raw=False, sndbuf=0)
    assert writer > 0 and reader > 0
    assert bench.main(["--submissions", "1", "--rounds", "1"]) == 0
    text = capsys.readouterr().out
    assert "128 messages" in text and "protocol / baseline:" in text
