"""Hostile submissions (tests/redteam/) graded in one batch per challenge, with correct controls among them.

Each attack must end with its targeted checks failed and the student told why; the grader
must exit 0 with every report written, the controls must keep full marks, nothing may be
written outside the scratch dirs, no secret may reach a report, and no process may survive.
An attack is graded on token_embedding unless its EXPECT names another ``challenge`` (a
Tensor method needs a challenge that forbids one); each other challenge is one more batch.
The sandbox needs root (as in CI containers); elsewhere these tests are skipped. An attack
whose defence needs more than that (``needs: cgroup``: a memory cgroup per worker) is not
graded where the machine cannot give it, and its test says why it was skipped.
"""

from __future__ import annotations

import ast
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from validator import paths, sandbox

ROOT = Path(__file__).resolve().parents[1]
REDTEAM = ROOT / "tests" / "redteam"
SECRET = "hunter2-" + os.urandom(6).hex()
TIMEOUT_S = 8

caps = sandbox.capabilities()
pytestmark = [pytest.mark.thorough,
              pytest.mark.skipif(not (caps["setuid"] and caps["namespaces"]),
                                 reason="the sandbox needs root with namespaces (as in CI containers)")]


def expectations(folder: Path) -> dict:
    tree = ast.parse((folder / "layers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "EXPECT":
            return ast.literal_eval(node.value)
    return {}


ATTACKS = {p.name: expectations(p) for p in sorted(REDTEAM.iterdir()) if (p / "layers.py").is_file()}
ATTACKS["symlink_reference"] = {"max_score": 0, "message": "symbolic link"}
ATTACKS["symlink_answer_key"] = {"max_score": 0, "message": "symbolic link", "no_secrets": True}
# Built at test time (_build_generated): answers that are links or nest deeply, and a 50 MB source.
KEY = {ch: {q: v["answer"] for q, v in qs.items()}
       for ch, qs in yaml.safe_load((paths.reference_dir() / "answer_key.yaml").read_text()).items()}
QUESTIONS = [f"question_{q}" for q in KEY["token_embedding"]]
for _name in ("answers_link_to_other", "answers_link_to_root_only", "answers_link_to_proc"):
    ATTACKS[_name] = {"fail": QUESTIONS, "message": "answers.yaml is a symbolic link", "code_passes": True}
ATTACKS["answers_deep_nesting"] = {"fail": QUESTIONS, "message": "nested more than", "code_passes": True}
ATTACKS["big_source"] = {"max_score": 0, "message": "layers.py is larger than 1 MiB"}
NEEDS = {"cgroup": (caps["cgroup"] is not None, "no memory cgroup can be made on this machine (cgroup v2 with "
                                                "the memory and pids controllers, or v1's memory hierarchy, "
                                                "writable by root): the sandbox limits memory per process here")}
SKIPPED = {name: NEEDS[e["needs"]][1] for name, e in ATTACKS.items() if e.get("needs") and not NEEDS[e["needs"]][0]}
GRADED = sorted(set(ATTACKS) - set(SKIPPED))
STATE_FILES = ("/dev/shm/redteam-state", "/tmp/redteam-state", "/var/tmp/redteam-state", "/run/lock/redteam-state")
MAIN = "token_embedding"
CHALLENGE = {name: expect.get("challenge", MAIN) for name, expect in ATTACKS.items()}
OTHERS = sorted(set(CHALLENGE.values()) - {MAIN})  # graded in batches of their own, after the main one


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """Grade the red-team folder once, even under pytest-xdist (the first worker grades, the others wait)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # this session's folder, shared by its xdist workers
    with open(shared / "redteam.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        base = shared / "redteam"
        if not (base / "result.json").exists():
            _grade_redteam(base)
    result = json.loads((base / "result.json").read_text())
    outs = {MAIN: base / "out", **{c: base / f"out-{c}" for c in OTHERS}}
    reports, out_of = {}, {}
    for out in outs.values():
        for p in out.glob("*.json"):
            if p.stem.startswith("dashboard"):  # the class dashboard, not a submission's report
                continue
            reports[p.stem] = json.loads(p.read_text())
            out_of[p.stem] = out
    manifests = [json.loads((out / "shards" / "shard-1-of-1.json").read_text()) for out in outs.values()]
    return {**result, "out": outs[MAIN], "outs": outs, "out_of": out_of, "subs": base / "submissions",
            "reports": reports, "manifest": manifests[0], "manifests": manifests}


def _grade_redteam(base: Path) -> None:
    shutil.rmtree(base, ignore_errors=True)
    subs, out = base / "submissions", base / "out"
    shutil.copytree(REDTEAM, subs, ignore=shutil.ignore_patterns("README.md", *SKIPPED))
    for challenge in OTHERS:  # each in a folder of submissions of its own, graded on its own challenge
        for name in [n for n, c in CHALLENGE.items() if c == challenge and n not in SKIPPED]:
            shutil.move(subs / name, _mkdir(base / f"submissions-{challenge}") / name)
    for name, target in (("symlink_reference", paths.reference_dir() / "layers.py"),
                         ("symlink_answer_key", paths.reference_dir() / "answer_key.yaml")):
        (subs / name).mkdir()
        (subs / name / "layers.py").symlink_to(target)
    _build_generated(subs, base)
    control = (subs / "aa_control" / "layers.py").read_text()
    env = dict(os.environ, VALIDATOR_TEST_SECRET=SECRET)
    # A second, world-readable checkout of the course outside the grader's own (a TA's clone):
    # the hide list does not name it, so only covering unknown top-level folders keeps it out.
    decoy = Path("/validator-decoy-" + os.urandom(4).hex())
    (decoy / "course").mkdir(parents=True)
    shutil.copytree(paths.reference_dir(), decoy / "course" / "reference")
    for path in [decoy, *decoy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    runs = [(MAIN, subs, out)] + [(c, base / f"submissions-{c}", base / f"out-{c}") for c in OTHERS]
    procs = {}
    try:
        for challenge, folder, into in runs:
            procs[challenge] = subprocess.run(
                [sys.executable, "-m", "validator", "grade", str(folder), "--out", str(into), "--challenge", challenge,
                 "--workers", "2", "--timeout", str(TIMEOUT_S), "--memory", "1024"],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    finally:
        shutil.rmtree(decoy, ignore_errors=True)
    (base / "result.json").write_text(json.dumps({
        "returncode": max(p.returncode for p in procs.values()), "stderr": "\n".join(p.stderr for p in procs.values()),
        "control": control, "secret": SECRET, "subs_of": {c: str(folder) for c, folder, _ in runs}}))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _build_generated(subs: Path, base: Path) -> None:
    """The attacks that are links or too large to commit; zz_control answers every question right."""
    control = (subs / "aa_control" / "layers.py").read_text()
    (subs / "zz_control" / "answers.yaml").write_text(yaml.safe_dump({"token_embedding": KEY["token_embedding"]}))
    root_only = base / "root_only.yaml"
    root_only.write_text(yaml.safe_dump({"token_embedding": KEY["token_embedding"], "secret": SECRET}))
    root_only.chmod(0o600)
    for name, target in (("answers_link_to_other", subs / "zz_control" / "answers.yaml"),
                         ("answers_link_to_root_only", root_only),
                         ("answers_link_to_proc", Path("/proc/self/environ"))):  # holds the grader's SECRET
        (subs / name).mkdir()
        (subs / name / "layers.py").write_text(control)
        (subs / name / "answers.yaml").symlink_to(target)
    (subs / "answers_deep_nesting").mkdir()
    (subs / "answers_deep_nesting" / "layers.py").write_text(control)
    (subs / "answers_deep_nesting" / "answers.yaml").write_text("token_embedding: " + "[" * 60_000)
    (subs / "big_source").mkdir()
    with open(subs / "big_source" / "layers.py", "w") as fh:
        fh.write(control)
        line = "# " + "x" * 998 + "\n"
        fh.write(line * (50 << 10))  # 50 MB of comments after a correct layer


def test_grader_survives_and_writes_every_report(batch):
    assert batch["returncode"] == 0, batch["stderr"][-3000:]
    assert set(batch["reports"]) == set(GRADED)
    assert all(m["grader_failures"] == [] for m in batch["manifests"])
    csv_names = [line.split(",")[0] for out in batch["outs"].values()
                 for line in (out / "grades.csv").read_text().splitlines()[1:]]
    assert sorted(csv_names) == GRADED


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_is_contained(batch, name):
    if name in SKIPPED:
        pytest.skip(SKIPPED[name])
    expect = ATTACKS[name]
    report = batch["reports"][name]
    checks = {c["id"]: c for ch in report["challenges"] for c in ch["checks"]}
    text = json.dumps(report)
    if expect.get("control") or expect.get("code_passes"):
        code = [c for c in checks.values() if c["kind"] != "question"]
        assert all(c["status"] in ("passed", "advisory") for c in code), \
            [(c["id"], c["message"][:200]) for c in code if c["status"] not in ("passed", "advisory")]
        if expect.get("control"):
            return
    for check_id in expect.get("fail", []):
        assert checks[check_id]["status"] not in ("passed", "advisory"), (check_id, checks[check_id])
    for check_id in expect.get("review") if isinstance(expect.get("review"), list) else []:
        assert checks[check_id]["review"], (check_id, checks[check_id])
        assert any(r.startswith(f"{CHALLENGE[name]}/{check_id}:") for r in report["review"]), report["review"]
    if "max_score" in expect:
        assert report["score"] <= expect["max_score"]
    if "message" in expect:
        assert expect["message"] in text, text[:3000]
    if expect.get("review"):
        assert report["review"], "the submission is not marked for review"
    for check_id in expect.get("passes", []):
        assert checks[check_id]["status"] == "passed", (check_id, checks[check_id])
    for words in expect.get("absent", []):
        assert words not in text, f"{words!r} in the report: {text[:3000]}"
    assert batch["secret"] not in text, "the grader's environment reached a report"
    assert "imported the reference" not in text
    # Explanations come from the key on purpose (they are shown once a question is graded);
    # everything else in a report must hold no line of the reference or of the key.
    unprompted = json.dumps([{k: v for k, v in c.items() if k != "explanation"} for c in checks.values()],
                            ensure_ascii=False)
    own_source = (REDTEAM / name / "layers.py").read_text() if (REDTEAM / name).is_dir() else ""
    for secret_file in (paths.reference_dir() / "layers.py", paths.reference_dir() / "answer_key.yaml"):
        for line in secret_file.read_text().splitlines():
            line = line.strip()
            if len(line) > 40 and line not in own_source:
                assert line not in unprompted, f"{secret_file.name} leaked: {line}"


def test_reports_are_valid_for_every_format(batch):
    import xml.etree.ElementTree as ET

    for name in GRADED:
        out = batch["out_of"][name]
        ET.parse(out / "junit" / f"{name}.xml")
        json.loads((out / "gradescope" / name / "results.json").read_text())
        tags = _start_tags((out / "html" / f"{name}.html").read_text())
        assert "script" not in tags and "iframe" not in tags and tags.count("html") == 1, name


def _start_tags(page: str) -> list[str]:
    """Every element a browser would open in ``page``: what a hostile message would have to smuggle in."""
    from html.parser import HTMLParser

    seen: list[str] = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: seen.append(tag)
    parser.feed(page)
    return seen


def test_no_process_left_behind(batch):
    uids = [uid for m in batch["manifests"] for uid in m["worker_uids"]]
    assert uids, "the batch ran without per-slot uids"
    for uid in uids:
        assert sandbox.processes_of(uid) == []


def test_nothing_written_outside_scratch(batch):
    for path in (ROOT / "validator").rglob("*.py"):
        assert "pwned" not in path.read_text(), f"{path} was altered"
    assert (batch["subs"] / "aa_control" / "layers.py").read_text() == batch["control"]
    for path in ("/tmp/redteam-was-here", "/var/tmp/redteam-was-here", "/dev/shm/redteam-was-here",
                 str(batch["subs"] / "redteam-was-here")):
        assert not os.path.exists(path), path
    folders = list(batch["outs"].values()) + [Path(p) for p in batch["subs_of"].values()]
    for path in [p for folder in folders for p in folder.rglob("*")]:
        if path.is_file():
            assert b"\nraise SystemExit('pwned')\n" not in path.read_bytes(), f"{path} was altered"


def test_worker_could_not_read_the_reference(batch):
    report = batch["reports"]["read_secrets"]
    text = json.dumps(report)
    assert "LEAK" in text  # the attack ran and reported what it saw ...
    assert "Permission denied" in text or "No such file" in text or "ModuleNotFoundError" in text
    ref_source = (paths.reference_dir() / "layers.py").read_text()[:200]
    assert ref_source[:80] not in text  # ... which is nothing of the reference
    assert "validator-decoy-" in text  # it saw the other checkout's folder, and nothing inside it


def test_controls_answers_were_graded(batch):
    """The answers the links point at are right: a link that were followed would have earned points."""
    checks = {c["id"]: c for ch in batch["reports"]["zz_control"]["challenges"] for c in ch["checks"]}
    assert all(checks[q]["status"] == "passed" for q in QUESTIONS), [checks[q] for q in QUESTIONS]


def test_no_state_left_behind(batch):
    """No file, SysV IPC object or kernel key of state_a_writer's outlives the batch."""
    for path in STATE_FILES:
        assert not os.path.exists(path), path
    assert not _sysv_objects(0x5EED)
    for uid in [uid for m in batch["manifests"] for uid in m["worker_uids"]]:
        assert not _keys_of(uid), f"uid {uid} still holds keys"


def _sysv_objects(key: int) -> list[str]:
    found = []
    for kind in ("shm", "msg", "sem"):
        rows = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        found += [f"{kind}: {row}" for row in rows if row.split() and int(row.split()[0]) == key]
    return found


def _keys_of(uid: int) -> bool:
    """Whether ``uid``'s user, user-session or persistent keyring holds a key named redteam-state."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()

    def look():
        rings = [sandbox.KEY_SPEC_USER_KEYRING, sandbox.KEY_SPEC_USER_SESSION_KEYRING]
        persistent = sandbox._keyctl(sandbox.KEYCTL_GET_PERSISTENT, -1, sandbox.KEY_SPEC_SESSION_KEYRING)
        rings += [persistent] if persistent > 0 else []
        hit = any(libc.syscall(ctypes.c_long(sandbox._KEYCTL), ctypes.c_long(10), ctypes.c_long(ring), b"user",
                               b"redteam-state", ctypes.c_long(0)) > 0 for ring in rings)
        os.write(w, b"1" if hit else b"0")

    try:
        sandbox._as_uid(uid, look)
        return os.read(r, 1) == b"1"
    finally:
        os.close(r)
        os.close(w)


def test_state_does_not_cross_to_the_next_submission_in_a_slot(tmp_path):
    """The writer then the reader in ONE slot (one uid, graded in turn): the reader must see nothing."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for name in ("state_a_writer", "state_b_reader"):
        shutil.copytree(REDTEAM / name, subs / name)
    proc = subprocess.run([sys.executable, "-m", "validator", "grade", str(subs), "--out", str(out),
                           "--challenge", "token_embedding", "--workers", "1", "--timeout", str(TIMEOUT_S)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = (out / "state_b_reader.json").read_text()
    assert "state seen: nothing" in text, text[:3000]
    manifest = json.loads((out / "shards" / "shard-1-of-1.json").read_text())
    for uid in manifest["worker_uids"]:
        assert not _keys_of(uid)
    for path in STATE_FILES:
        assert not os.path.exists(path), path
    assert not _sysv_objects(0x5EED)
