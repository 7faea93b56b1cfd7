"""The course view end to end on a generated class of 200 (thorough tier: it grades 240 submissions).

The class (benchmarks/bench_batch.py's ``generate_class``): independent correct solutions composed from the
mutant library's correct variants, every broken file of three challenges' libraries seeded one to three
times, and ten renamed, re-laid-out copies of other submissions. Signatures are recorded from the same
library with `validator signatures`'s code. The dashboard must name each seeded bug class with its true
count, the similarity report must rank every copied pair above every independent pair, and a regrade after a
one-check spec change must list exactly the submissions and checks whose verdicts changed.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import pytest

from validator.batch import grade as batch_grade
from validator.batch import signatures as sigs

ROOT = Path(__file__).resolve().parents[1]
CHALLENGES = ["rms_norm", "softmax", "rope"]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_batch", ROOT / "benchmarks" / "bench_batch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdicts(folder: Path, name: str) -> dict:
    report = json.loads((folder / f"{name}.json").read_text())
    return {(ch["id"], c["id"]): (c["status"], c["score"], c["max_score"])
            for ch in report["challenges"] for c in ch["checks"]}


@pytest.mark.thorough
def test_a_generated_class_of_200(tmp_path, monkeypatch):
    kinds = _bench().generate_class(tmp_path / "subs", 200, challenges=CHALLENGES, seed=3, copies=10)
    signatures = sigs.build(challenges=CHALLENGES, workers=2, timeout=120, stream=io.StringIO())
    assert not [n for n in signatures.notes if "grader failed" in n], signatures.notes
    sig_file = tmp_path / "signatures.json"
    sigs.write(signatures, sig_file)
    out = tmp_path / "out"
    log = io.StringIO()
    code = batch_grade.grade_folder(submissions=tmp_path / "subs", out=out, challenges=CHALLENGES, workers=2,
                                    timeout=120, signatures=sig_file, stream=log, live=False)
    assert code == 0, log.getvalue()[-3000:]
    data = json.loads((out / "dashboard.json").read_text())
    assert (out / "dashboard.html").is_file()

    # -- every seeded bug class, with its true count -------------------------------------------------
    by_bug = {b.id.split(":", 1)[1]: b for b in signatures.bugs if b.source == "library"}
    for name, kind in kinds.items():
        report = json.loads((out / f"{name}.json").read_text())
        lost = {ch["id"]: sigs.lost_checks(ch) for ch in report["challenges"]}
        if kind["bug"] is None:  # correct ones (and their copies) lose no code check
            assert not any(lost.values()), (name, lost)
    classes: dict[tuple, set[str]] = {}  # (challenge, lost checks) -> the seeded bugs that produce it
    for bug_id, bug in by_bug.items():
        classes.setdefault((bug.challenge, tuple(bug.lost[bug.challenge])), set()).add(bug_id)
    patterns = {(p["challenge"], tuple(p["lost"])): p for p in data["patterns"]}
    seeded = {(b.challenge, tuple(b.lost[b.challenge])) for b in by_bug.values()
              if any(k["bug"] == b.id.split(":", 1)[1] for k in kinds.values())}
    assert seeded, "no bug was seeded"
    for key in seeded:
        true_count = sum(1 for k in kinds.values() if k["bug"] in classes[key])
        pattern = patterns.get(key)
        assert pattern is not None, f"no pattern for {key}"
        assert pattern["count"] == true_count, (key, pattern["count"], true_count)
        assert pattern["relation"] == "own" and {b.split(":", 1)[1] for b in pattern["bugs"] if
                                                 b.startswith("library:")} == classes[key]
        named = {by_bug[b].name for b in classes[key]}
        assert any(n in pattern["name"] for n in named), (pattern["name"], named)
    assert set(patterns) == seeded, f"patterns no seeded bug explains: {set(patterns) - seeded}"

    # -- every copied pair above every independent pair -------------------------------------------------
    pairs = data["similarity"]["pairs"]
    copied = {frozenset((n, k["copy_of"])) for n, k in kinds.items() if k["kind"] == "copy"}
    top = [frozenset((p["a"], p["b"])) for p in pairs[:len(copied)]]
    assert set(top) == copied, (top, copied)
    assert pairs[len(copied)]["score"] < min(p["score"] for p in pairs[:len(copied)])
    assert data["similarity"]["views"]

    # -- a one-check spec change: exactly what moved, and why ------------------------------------------
    changed_specs = tmp_path / "challenges"
    shutil.copytree(ROOT / "challenges", changed_specs, ignore=shutil.ignore_patterns("fixtures"))
    spec = (changed_specs / "rms_norm.yaml").read_text()
    marker = "  - id: fp16_large_inputs\n    kind: values\n    test: stability\n    input_dtype: float16\n"
    assert marker in spec
    (changed_specs / "rms_norm.yaml").write_text(spec.replace(marker, marker.replace("float16", "float32")))
    monkeypatch.setenv("VALIDATOR_CHALLENGES", str(changed_specs))
    subset = tmp_path / "regrade"
    chosen = sorted(n for n, k in kinds.items() if (k["bug"] or "").startswith("rms_norm/"))[:30] + \
        sorted(n for n, k in kinds.items() if k["bug"] is None)[:10]
    for name in chosen:
        shutil.copytree(tmp_path / "subs" / name, subset / name)
    again = tmp_path / "out2"
    code = batch_grade.grade_folder(submissions=subset, out=again, challenges=CHALLENGES, workers=2, timeout=120,
                                    signatures=sig_file, compare=out, stream=log, live=False)
    assert code == 0, log.getvalue()[-3000:]
    audit = json.loads((again / "compare.json").read_text())
    listed = {(s["name"], c["challenge"], c["check"]) for s in audit["students"] if s["direction"] != "removed"
              for c in s["checks"]}
    truth = {(name, *key) for name in chosen for key, v in _verdicts(again, name).items()
             if _verdicts(out, name).get(key) != v}
    assert truth and listed == truth
    assert {key[1:] for key in truth} == {("rms_norm", "fp16_large_inputs")}
    assert all(c["why"] == ["the spec of rms_norm/fp16_large_inputs changed"]
               for s in audit["students"] for c in s["checks"] if s["direction"] != "removed")
    assert {s["name"] for s in audit["students"] if s["direction"] == "removed"} == set(kinds) - set(chosen)
