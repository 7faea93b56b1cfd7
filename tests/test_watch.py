"""`submit-build --watch`: which challenges a save regrades, one event per save, and what is printed.

The default tier runs the pieces on small files with a fake clock and fake graders; the thorough tier
starts the command on a copy of the reference, edits it, and stops it.
"""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from validator.results import ChallengeResult, CheckResult, Report
from validator.submit import SubmitOptions
from validator.watch import (ChangeWatcher, LayersFile, NotGradable, WatchSession, _contents, check_groups,
                             needs_regrade, watch_build)

ROOT = Path(__file__).resolve().parents[1]

LAYERS = '''\
import torch


def helper(x):
    return x * 2


class A(torch.nn.Module):
    def forward(self, x):
        return helper(x)


class B(torch.nn.Module):
    def forward(self, x):
        return x + 1


class C(torch.nn.Module):
    def forward(self, x):
        return x - 1
'''


def _challenge(cid: str, *entries: str, checks=(), banned=(), allowed=()):
    from validator.integrity import Allowlist

    policy = Allowlist.changed(add=tuple(allowed))
    return SimpleNamespace(id=cid, title=cid, entries={e: None for e in entries}, checks=list(checks),
                           questions=[], forbidden=SimpleNamespace(source=list(banned), allowlist=lambda: policy,
                                                                   integrity=SimpleNamespace(allow=[])))


CHALLENGES = [_challenge("a", "A"), _challenge("b", "B"), _challenge("c", "C", banned=["torch.softmax"])]


def _result(cid: str, message: str = "", status: str = "passed") -> ChallengeResult:
    return ChallengeResult(id=cid, title=cid, checks=[CheckResult(id="k", kind="values", status=status,
                                                                  score=1.0 if status == "passed" else 0.0,
                                                                  max_score=1.0, message=message)])


def _regraded(tmp_path: Path, before: str, after: str, results=None) -> list[str]:
    layers = tmp_path / "layers.py"
    side = LayersFile(layers, tmp_path / "answers.yaml")
    layers.write_text(before)
    old = side.read(CHALLENGES, {}).fingerprints
    layers.write_text(after)
    new = side.read(CHALLENGES, {}).fingerprints
    results = results or {c.id: _result(c.id) for c in CHALLENGES}
    return [c.id for c in CHALLENGES if needs_regrade(old[c.id], new[c.id], results[c.id])]


# -- which challenges a save regrades -------------------------------------------------------------------------------
def test_an_edit_regrades_the_challenges_whose_entries_run_the_edited_code(tmp_path):
    assert _regraded(tmp_path, LAYERS, LAYERS.replace("x + 1", "x + 2")) == ["b"]
    assert _regraded(tmp_path, LAYERS, LAYERS.replace("x * 2", "x * 3")) == ["a"]  # a helper A calls
    assert _regraded(tmp_path, LAYERS, LAYERS.replace("import torch\n", "import torch\nimport math\n")) == \
        ["a", "b", "c"]  # module-level code runs for every entry
    assert _regraded(tmp_path, LAYERS, LAYERS + "\n\ndef unused():\n    return 1\n") == []


def test_lines_that_only_moved_regrade_only_results_that_name_a_line(tmp_path):
    moved = LAYERS.replace("\n\ndef helper", "\n\n# a comment above everything\n\ndef helper")
    assert _regraded(tmp_path, LAYERS, moved) == []
    failing = {c.id: _result(c.id) for c in CHALLENGES}
    failing["b"] = _result("b", "calling B raised ValueError: no\n  at layers.py:14 in forward: ...", "error")
    assert _regraded(tmp_path, LAYERS, moved, failing) == ["b"]


def test_a_banned_api_outside_every_entry_regrades_the_challenge_that_bans_it(tmp_path):
    """Code no entry runs is advice in the report of a challenge that bans what it uses: that report changes."""
    extra = LAYERS + "\n\ndef sample(x):\n    return torch.softmax(x, -1)\n"
    assert _regraded(tmp_path, LAYERS, extra) == ["c"]


def test_a_name_off_the_allowlist_outside_every_entry_regrades_the_challenges_whose_allowlist_lacks_it(tmp_path):
    """Each challenge judges the scan by its own allowlist: one that allows the module keeps its result."""
    challenges = [_challenge("a", "A"), _challenge("b", "B", allowed=["csv"])]
    layers = tmp_path / "layers.py"
    side = LayersFile(layers, tmp_path / "answers.yaml")
    layers.write_text(LAYERS)
    old = side.read(challenges, {}).fingerprints
    layers.write_text(LAYERS + "\n\ndef rows(f):\n    import csv\n    return list(csv.reader(f))\n")
    new = side.read(challenges, {}).fingerprints
    assert [c.id for c in challenges if needs_regrade(old[c.id], new[c.id], _result(c.id))] == ["a"]


def test_an_answer_regrades_its_challenge(tmp_path):
    layers = tmp_path / "layers.py"
    layers.write_text(LAYERS)
    side = LayersFile(layers, tmp_path / "answers.yaml")
    old = side.read(CHALLENGES, {"b": {"q": 1}}).fingerprints
    new = side.read(CHALLENGES, {"b": {"q": 2}}).fingerprints
    assert [c.id for c in CHALLENGES if needs_regrade(old[c.id], new[c.id], _result(c.id))] == ["b"]


def test_a_helper_module_beside_layers_py_counts_where_it_is_imported(tmp_path):
    (tmp_path / "helpers.py").write_text("def double(x):\n    return x * 2\n")
    source = LAYERS.replace("import torch\n", "import torch\nfrom helpers import double\n").replace(
        "return x - 1", "return double(x)")
    layers = tmp_path / "layers.py"
    layers.write_text(source)
    side = LayersFile(layers, tmp_path / "answers.yaml")
    old = side.read(CHALLENGES, {}).fingerprints
    (tmp_path / "helpers.py").write_text("def double(x):\n    return x * 3\n")
    new = side.read(CHALLENGES, {}).fingerprints
    assert [c.id for c in CHALLENGES if needs_regrade(old[c.id], new[c.id], _result(c.id))] == ["c"]


def test_a_file_that_does_not_parse_says_where_and_grades_nothing(tmp_path):
    layers = tmp_path / "layers.py"
    layers.write_text(LAYERS.replace("return x + 1", "return (x +"))
    with pytest.raises(NotGradable) as caught:
        LayersFile(layers, tmp_path / "answers.yaml").read(CHALLENGES, {})
    message = str(caught.value)
    assert message.startswith("layers.py:15:") and "never closed" in message
    assert "return (x +" in message and "^" in message
    # a broken file nothing imports is not the student's problem
    layers.write_text(LAYERS)
    (tmp_path / "scratch.py").write_text("def oops(:\n")
    LayersFile(layers, tmp_path / "answers.yaml").read(CHALLENGES, {})
    layers.write_text("import scratch\n" + LAYERS)
    with pytest.raises(NotGradable, match=r"scratch.py:1"):
        LayersFile(layers, tmp_path / "answers.yaml").read(CHALLENGES, {})


# -- one save, one event --------------------------------------------------------------------------------------------
class _FakeFiles:
    """A file system of (mtime, size, inode) triples and a clock, both moved by the test."""

    def __init__(self):
        self.files: dict[str, tuple[int, int, int]] = {}
        self.now = 0.0

    def stat(self, path):
        if path not in self.files:
            raise FileNotFoundError(path)
        mtime, size, ino = self.files[path]
        return SimpleNamespace(st_mtime_ns=mtime, st_size=size, st_ino=ino)

    def watcher(self, names):
        return ChangeWatcher(lambda: names, interval=0.03, settle=0.06, clock=lambda: self.now,
                             sleep=self.sleep, stat=self.stat)

    def sleep(self, seconds):
        self.now += seconds


def test_a_save_as_rename_is_one_event_once_it_has_settled():
    fs = _FakeFiles()
    fs.files["layers.py"] = (1, 100, 7)
    w = fs.watcher(["layers.py", "answers.yaml"])
    assert w.poll() is None
    del fs.files["layers.py"]             # the editor moves the old file away...
    assert w.poll() is None
    fs.now += 0.01
    fs.files["layers.py"] = (2, 104, 8)   # ...and renames its new one over it
    assert w.poll() is None
    fs.now += 0.03
    assert w.poll() is None               # not settled yet
    fs.now += 0.06
    assert w.poll() == ["layers.py"]
    fs.now += 1.0
    assert w.poll() is None               # reported once


def test_wait_returns_the_files_that_changed_and_a_change_undone_is_none():
    fs = _FakeFiles()
    fs.files["layers.py"] = (1, 100, 7)
    w = fs.watcher(["layers.py", "answers.yaml"])
    fs.files["layers.py"] = (2, 100, 7)
    assert w.poll() is None
    fs.files["layers.py"] = (1, 100, 7)   # changed back before it settled
    for _ in range(10):
        fs.now += 0.03
        assert w.poll() is None
    fs.files["answers.yaml"] = (5, 10, 9)  # a new file counts
    started = fs.now
    assert w.wait() == ["answers.yaml"]
    assert 0.06 <= fs.now - started < 0.2


# -- what a regrade prints ------------------------------------------------------------------------------------------
class _Side:
    def __init__(self, tmp_path):
        self.answers_path = tmp_path / "answers.yaml"
        self.layers = tmp_path / "layers.py"
        self.inner = LayersFile(self.layers, self.answers_path)

    def files(self):
        return [str(self.layers)]

    def read(self, challenges, answers):
        return self.inner.read(challenges, answers)


def _session(tmp_path, console_file, during_first_run=None):
    from rich.console import Console

    side = _Side(tmp_path)
    side.layers.write_text(LAYERS)
    before = _contents(side)
    if during_first_run:
        side.layers.write_text(during_first_run)
    first = Report(challenges=[_result(c.id) for c in CHALLENGES], seed=5, student=str(side.layers),
                   profile="quick")
    console = Console(file=console_file, width=200, soft_wrap=True, highlight=False)
    session = WatchSession(side=side, opts=SimpleNamespace(json_path=None, html_path=None), first=first,
                           catalogue={c.id: c for c in CHALLENGES}, header={}, console=console, terminal=False)
    session.baseline(before)
    graded = []

    def grade(ids, snapshot, answers):
        graded.append(list(ids))
        return Report(challenges=[_result(i, "worse", "failed") for i in ids], seed=5, student="", profile="quick")

    session.grade = grade
    return session, side, graded


def test_off_a_terminal_each_regrade_prints_its_results_and_a_summary(tmp_path):
    out = io.StringIO()
    session, side, graded = _session(tmp_path, out)
    side.layers.write_text(LAYERS.replace("x + 1", "x + 2"))
    session.show(session.on_change([str(side.layers)]))
    text = out.getvalue()
    assert graded == [["b"]]
    assert "[watch] layers.py changed: regrading b ..." in text
    assert re.search(r"^  b +0/1 ", text, re.MULTILINE) and re.search(r"^  a +1/1 ", text, re.MULTILINE)
    assert re.search(r"^\[watch\] watching layers\.py · layers\.py saved: regraded b in [\d.]+ s", text, re.MULTILINE)
    assert session.report().score == 2.0  # a and c kept their results


def test_a_save_that_does_not_parse_keeps_the_results_and_the_next_good_save_regrades(tmp_path):
    out = io.StringIO()
    session, side, graded = _session(tmp_path, out)
    side.layers.write_text(LAYERS.replace("return x + 1", "return (x +"))
    session.show(session.on_change([str(side.layers)]))
    assert graded == [] and "[watch] not regraded: layers.py:15:" in out.getvalue()
    side.layers.write_text(LAYERS.replace("x + 1", "x + 2"))
    session.show(session.on_change([str(side.layers)]))
    assert graded == [["b"]]
    side.layers.write_text(LAYERS.replace("x + 1", "x + 2") + "\n# the end\n")
    session.show(session.on_change([str(side.layers)]))
    assert graded == [["b"]] and "nothing the graded code reads changed, results kept" in out.getvalue()


def test_a_save_during_the_first_run_regrades_everything_at_the_next_change(tmp_path):
    session, side, graded = _session(tmp_path, io.StringIO(), during_first_run=LAYERS.replace("x + 1", "x + 2"))
    session.on_change([str(side.layers)])
    assert graded == [["a", "b", "c"]]


def test_ctrl_c_stops_the_watch_with_status_zero(tmp_path):
    from rich.console import Console

    out = io.StringIO()
    (tmp_path / "layers.py").write_text(LAYERS)
    specs = tmp_path / "challenges"
    specs.mkdir()
    (specs / "softmax.yaml").write_text((ROOT / "challenges" / "softmax.yaml").read_text())

    def first_run(**options):
        raise KeyboardInterrupt  # Ctrl-C during the first run; between saves it is the same path

    opts = SubmitOptions(student=str(tmp_path), challenges_dir=str(specs), interactive=False, watch=True)
    before = signal.getsignal(signal.SIGINT)  # the default handler, or SIG_IGN in a runner started in the background
    code = watch_build(opts, console=Console(file=out), first_run=first_run)
    assert code == 0 and "stopped watching" in out.getvalue()
    assert signal.getsignal(signal.SIGTERM) is not None and signal.getsignal(signal.SIGINT) is before


def test_watch_on_a_notebook_is_a_usage_error_that_says_what_to_do_before_anything_is_graded(tmp_path, capsys,
                                                                                             monkeypatch):
    from rich.console import Console

    from validator import submit

    notebook = tmp_path / "part4.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    monkeypatch.setattr(submit, "submit_build", lambda **_: pytest.fail("graded a notebook it cannot watch"))
    code = submit.main(console=Console(file=io.StringIO()), student=str(notebook), watch=True, interactive=False)
    err = capsys.readouterr().err
    assert code == submit.EXIT_USAGE
    assert "--watch follows a layers.py or a package, not a notebook yet" in err and "validator.check(" in err


def test_one_challenge_splits_into_groups_that_keep_required_and_hinted_checks_together(monkeypatch):
    from validator import checks as registry

    def check(cid, requires=(), hint_from=()):
        return SimpleNamespace(id=cid, requires=list(requires), hint_from=list(hint_from))

    monkeypatch.setattr(registry, "params_of", lambda c: SimpleNamespace(
        hint_if=[SimpleNamespace(passed=c.hint_from, failed=[])] if c.hint_from else []))
    ch = SimpleNamespace(checks=[check("a"), check("b", requires=["a"]), check("c"), check("d", hint_from=["c"]),
                                 check("e"), check("f")])
    groups = check_groups(ch, {"a": 3.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0}, 2)
    assert sorted(sum(groups, [])) == list("abcdef")
    assert any({"a", "b"} <= set(g) for g in groups) and any({"c", "d"} <= set(g) for g in groups)
    assert [sum({"a": 3.0}.get(c, 1.0) for c in g) for g in groups] == [4.0, 4.0]
    assert all(g == sorted(g) for g in groups)  # each group in the spec's order
    assert check_groups(ch, {}, 1) == [list("abcdef")]


# -- the command, end to end ---------------------------------------------------------------------------------------
def _processes_mentioning(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.mark.thorough
@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="looks for leftover processes in /proc")
def test_watch_regrades_the_edited_challenge_says_what_does_not_parse_and_stops_cleanly(tmp_path):
    student = tmp_path / "watched-student"
    student.mkdir()
    reference = (ROOT / "reference" / "layers.py").read_text()
    layers = student / "layers.py"
    layers.write_text(reference)
    proc = subprocess.Popen([sys.executable, "-m", "validator", "submit-build", "--watch", "--student", str(student),
                             "--no-input", "--seed", "3", "--profile", "quick", "--challenge", "softmax",
                             "--challenge", "rms_norm"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1,
                            # as a terminal starts it: a runner that ignores SIGINT (a background job) must not
                            # pass that on, or the Ctrl-C below never arrives
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []

    def read_until(pattern: str, timeout: float = 300.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError("the watch stopped:\n" + "".join(lines[-40:]))
            lines.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r}:\n" + "".join(lines[-40:]))

    try:
        read_until(r"^\[watch\] watching layers\.py")
        assert any(re.match(r"^  softmax +\d+/\d+ +\d+ passed", line) for line in lines)
        start = len(lines)
        # softmax without subtracting the max: overflows at large inputs
        shift = "shifted = wide - wide.amax(dim=dim, keepdim=True)"
        assert shift in reference, "the reference's softmax changed: update this test's edit"
        broken = reference.replace(shift, "shifted = wide")
        layers.write_text(broken)
        status = read_until(r"^\[watch\] watching .* saved")
        assert "regraded softmax in" in status and "rms_norm" not in status
        regrade = "".join(lines[start:])
        assert "regrading softmax ..." in regrade and "FAIL" in regrade
        layers.write_text(broken.replace("def softmax(", "def softmax(("))
        read_until(r"^\[watch\] not regraded: layers\.py:\d+")
        layers.write_text(reference)
        status = read_until(r"^\[watch\] watching .* saved")
        assert "regraded softmax in" in status
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    rest = proc.stdout.read()
    assert code == 0, rest
    assert "stopped watching" in rest
    time.sleep(0.5)
    assert _processes_mentioning(str(student)) == []


@pytest.mark.thorough
@pytest.mark.parametrize("broken", ["ids_clamped.py", "embedding_bag_forward.py"])
def test_a_challenge_graded_in_groups_of_checks_gets_the_verdicts_and_messages_of_a_whole_run(broken):
    """The watch spreads one challenge's checks over the graders; put back together, the result is the one a
    single grading gives: every check's status, points and message (timings aside), and the questions."""
    from helpers import IMPLEMENTATIONS, catalogue

    from validator.api import grade
    from validator.worker.client import Worker

    path = IMPLEMENTATIONS / "token_embedding" / "broken" / broken
    answers = {"token_embedding": {"gpt2_token_table_params": 38597376, "negative_id_wraps": "b"}}  # right, wrong
    whole = grade(path, challenges=["token_embedding"], seed=4, profile="quick", answers=answers,
                  catalogue=catalogue()).challenges[0]
    side = LayersFile(path, path.parent / "answers.yaml")
    first = Report(challenges=[whole], seed=4, student=str(path), profile="quick")
    session = WatchSession(side=side, opts=SubmitOptions(interactive=False), first=first, catalogue=catalogue(),
                           header={}, console=None, terminal=False)
    groups = check_groups(catalogue()["token_embedding"], {c.id: c.duration_s for c in whole.checks}, 2)
    assert len(groups) == 2
    with Worker(path) as worker:
        split = session._grade_groups(catalogue()["token_embedding"], groups, worker,
                                      side.read(session.selected, answers), answers).challenges[0]

    def verdicts(result):
        return [(c.id, c.status, c.score, c.max_score, c.message if c.kind != "performance" else "")
                for c in result.checks]

    assert verdicts(split) == verdicts(whole)
    assert split.problem == whole.problem and any(c.status == "failed" for c in whole.checks if c.kind != "question")
    graded = {c.id: c.status for c in whole.checks if c.kind == "question"}
    assert graded["question_gpt2_token_table_params"] == "passed" and graded["question_negative_id_wraps"] == "failed"
