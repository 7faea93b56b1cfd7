"""Evidence a submission cannot fake (issue 9): the integrity scan, tamper detection, op families, review marks."""

from __future__ import annotations

import ast
import threading

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError

from helpers import IMPLEMENTATIONS, code_checks, describe_failures, grade_file
from validator import runner
from validator.checks.constraint import forbidden_in
from validator.integrity import decode_source, scan_source, scan_submission
from validator.reporters.csv_report import grades_csv
from validator.reporters.gradescope import gradescope_dict
from validator.results import ChallengeResult, CheckResult, Report
from validator.spec.schema import Forbidden

BANNED = ["torch.nn.Embedding", "torch.nn.functional.embedding", "torch.embedding", "torch.ops.aten.*embedding*"]
CLEAN = "import torch\n\ndef lookup(ids, w):\n    return w[ids]\n"


def _whats(findings, unused=False):
    return [(f.line, f.what) for f in findings if f.unused_import == unused]


# -- the scan ------------------------------------------------------------------------------------
def test_unused_forbidden_import_is_advice_and_a_use_is_a_finding():
    unused = scan_source("from torch.nn import Embedding\nimport torch\nx = torch.zeros(1)\n", BANNED)
    assert _whats(unused) == [] and _whats(unused, unused=True) == [(1, "torch.nn.Embedding")]
    used = scan_source("from torch.nn import Embedding\nclass E(Embedding):\n    pass\n", BANNED)
    assert _whats(used) == [(2, "torch.nn.Embedding")] and _whats(used, unused=True) == []


@pytest.mark.parametrize("src,line,what", [
    ("import threading\nt = threading.Thread(target=print)\n", 2, "threads"),
    ("from concurrent.futures import ThreadPoolExecutor as P\np = P()\n", 2, "threads"),
    ("import os\nos.fork()\n", 2, "processes"),
    ("import ctypes\nctypes.CDLL(None)\n", 2, "ctypes"),
    ("x = eval('1')\n", 1, "dynamic_code"),
    ("m = __import__('torch')\n", 1, "dynamic_code"),
    ("import importlib\nm = importlib.import_module('torch')\n", 2, "dynamic_code"),
    ("import torch\nm = torch._C._get_dispatch_mode(None)\n", 2, "torch_internals"),
    ("from torch.utils._python_dispatch import _pop_mode\n_pop_mode()\n", 2, "torch_internals"),
    ("import torch\nf = torch.overrides.get_ignored_functions\n", 2, "torch_internals"),
    ("import gc\ngc.get_objects()\n", 2, "gc"),
    ("import inspect\ninspect.stack()\n", 2, "inspect"),
    ("import sys\nf = sys._getframe(1)\n", 2, "frames"),
    ("import torch.nn.functional as F\nname = 'embed' + 'ding'\nf = getattr(F, name)\n", 3, "computed_getattr"),
])
def test_constructs_are_found_with_their_line(src, line, what):
    assert (line, what) in _whats(scan_source(src, BANNED))


def test_literal_getattr_on_a_module_is_the_attribute_itself():
    found = scan_source("import torch\nf = getattr(torch.nn.functional, 'embedding')\n", BANNED)
    assert _whats(found) == [(2, "torch.nn.functional.embedding")]


def test_family_pattern_in_source_lists():
    found = scan_source("import torch\ng = torch.ops.aten._embedding_bag_dense_backward\n", BANNED)
    assert (2, "torch.ops.aten._embedding_bag_dense_backward") in _whats(found)


def test_local_names_and_honest_code_are_clean():
    src = ("import torch\n\ndef f(queue, gc, signal):\n    compile = 1\n    return queue, gc, signal, compile\n\n"
           "class E(torch.nn.Module):\n    def forward(self, ids):\n        return getattr(self, 'weight')[ids]\n")
    assert scan_source(src, BANNED) == []
    for path in sorted(IMPLEMENTATIONS.glob("*/correct/*.py")) + [IMPLEMENTATIONS.parents[1] / "reference" / "layers.py"]:
        assert [f.describe() for f in scan_submission(path, BANNED) if not f.unused_import] == [], path


def test_allow_list_lets_a_challenge_use_a_construct():
    src = "import threading\nlock = threading.Lock()\n"
    assert _whats(scan_source(src, BANNED)) == [(2, "threads")]
    assert scan_source(src, BANNED, allow={"threads"}) == []


def test_utf7_cookie_is_decoded_as_the_importer_does_and_is_itself_a_finding():
    data = b"# coding: utf-7\nimport torch.nn.functional as F\nout = F+AC4-embedding\n"
    text, cookie = decode_source("layers.py", data)
    assert "F.embedding" in text and [f.what for f in cookie] == ["coding_cookie"]
    assert (3, "torch.nn.functional.embedding") in _whats(scan_source(text, BANNED))
    assert decode_source("layers.py", b"# -*- coding: utf-8 -*-\nx = 1\n")[1] == []


def test_helper_modules_the_submission_imports_are_scanned(tmp_path):
    (tmp_path / "layers.py").write_text("from helper import lookup\n")
    (tmp_path / "helper.py").write_text("import torch.nn.functional as F\n\ndef lookup(i, w):\n    return F.embedding(i, w)\n")
    (tmp_path / "unrelated.py").write_text("import gc\ngc.collect()\n")  # not imported: never runs
    found = scan_submission(tmp_path / "layers.py", BANNED)
    assert [(f.file, f.line, f.what) for f in found] == [("helper.py", 4, "torch.nn.functional.embedding")]


def test_oversized_file_is_refused_not_read(tmp_path):
    from validator.integrity import Unreadable
    (tmp_path / "layers.py").write_bytes(b"#" * ((1 << 20) + 10))
    with pytest.raises(Unreadable, match="larger than"):
        scan_submission(tmp_path / "layers.py", BANNED)


# -- spec keys ---------------------------------------------------------------------------------------
def test_forbidden_spec_validates_allow_and_patterns():
    assert Forbidden(runtime=["aten.*embedding*"], integrity={"allow": ["threads"]}).integrity.allow == ["threads"]
    with pytest.raises(ValidationError, match="unknown construct"):
        Forbidden(integrity={"allow": ["thread"]})
    with pytest.raises(ValidationError, match="aten op names or globs"):
        Forbidden(runtime=["embedding"])


def test_family_covers_bag_kernels_but_not_honest_ops():
    ops = {"aten._embedding_bag_forward_only": 1, "aten._embedding_bag_dense_backward": 1,
           "aten.embedding_renorm_": 1, "aten.index": 2, "aten.index_put_": 1}
    assert forbidden_in(ops, ["aten.*embedding*"]) == ["aten._embedding_bag_dense_backward",
                                                        "aten._embedding_bag_forward_only", "aten.embedding_renorm_"]


# -- runtime observation ---------------------------------------------------------------------------------
def _traced(fn):
    call = {"entry": "f", "kind": "function", "want": ["output"], "trace_ops": True,
            "inputs": [{"value": torch.tensor([1, 2, 2])}, {"value": torch.randn(5, 3), "requires_grad": True}],
            "grad_output": torch.ones(3, 3)}
    return runner.execute({"f": fn}, call)


def test_honest_trace_is_not_tampered():
    result = _traced(lambda ids, w: w[ids].reshape(3, 3).contiguous() * 1.0)
    assert result["ok"] and result["tampered"] == [], result


def test_popped_dispatch_mode_is_tampered_evidence():
    from torch.utils._python_dispatch import _pop_mode, _push_mode

    def popped(ids, w):
        mode = _pop_mode()
        try:
            return F.embedding(ids, w)
        finally:
            _push_mode(mode)
    result = _traced(popped)
    assert "aten.embedding" not in result["ops"] and "aten.embedding" in result["profiled_ops"]
    assert any("never saw" in t and "aten.embedding" in t for t in result["tampered"]), result["tampered"]


def test_thread_started_in_forward_is_tampered_evidence(monkeypatch):
    import _thread

    # the counter patches thread starts process-wide: undo it, so other tests in this process see torch as is
    monkeypatch.setattr(_thread, "start_new_thread", _thread.start_new_thread)
    monkeypatch.setattr(threading, "_start_new_thread", threading._start_new_thread)
    monkeypatch.setattr(runner, "_THREADS_STARTED", [0])
    runner.install_thread_counter()

    def threaded(ids, w):
        box = {}
        t = threading.Thread(target=lambda: box.update(out=F.embedding(ids, w)))
        t.start()
        t.join()
        return box["out"]
    result = _traced(threaded)
    assert any("thread" in t for t in result["tampered"]), result["tampered"]


# -- review marks -------------------------------------------------------------------------------------------
def test_review_reaches_json_csv_and_gradescope():
    flagged = CheckResult(id="no_library_embedding_source", kind="constraint", status="failed", score=0, max_score=2,
                          review=["layers.py:3: `import threading`: threads"])
    report = Report(challenges=[ChallengeResult(id="token_embedding", title="", checks=[flagged])], seed=0,
                    student="s", profile="quick")
    assert report.to_dict()["review"] == ["token_embedding/no_library_embedding_source: layers.py:3: `import threading`: threads"]
    header, row = grades_csv([("s", report)]).splitlines()
    assert header.endswith(",review") and "threads" in row
    gs = gradescope_dict(report)
    assert "MARKED FOR REVIEW" in gs["output"] and "MARKED FOR REVIEW" in gs["tests"][0]["output"]


# -- the mutant library's new evasions ----------------------------------------------------------------------
def _may_fail(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MAY_FAIL":
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{path} declares no MAY_FAIL")


def _assert_caught_within(path, result, must=()):
    may = _may_fail(path)
    lost = {c.id for c in code_checks(result) if c.status in ("failed", "error") or (c.status == "skipped" and c.max_score)}
    assert lost & may, f"{path.name} was not caught:\n{describe_failures(result) or '  nothing failed'}"
    assert lost <= may, f"{path.name} lost points outside MAY_FAIL {sorted(may)}:\n{describe_failures(result)}"
    for check in must:
        assert check in lost, f"{path.name}: {check} should fail:\n{describe_failures(result)}"


@pytest.mark.thorough
def test_helper_module_mutant_is_caught_in_the_helper():
    path = IMPLEMENTATIONS / "token_embedding" / "broken" / "helper_module_lookup" / "layers.py"
    (result,) = grade_file(path, "token_embedding", checks=["no_library_embedding_source"])
    (check,) = code_checks(result)
    assert check.status == "failed" and "emb_helper.py:7" in check.message, check.message


@pytest.mark.thorough
def test_helper_module_mutant_loses_only_what_it_may():
    path = IMPLEMENTATIONS / "token_embedding" / "broken" / "helper_module_lookup" / "layers.py"
    (result,) = grade_file(path, "token_embedding")
    _assert_caught_within(path, result, must=["no_library_embedding_source"])


def test_unused_forbidden_import_costs_nothing(tmp_path):
    source = (IMPLEMENTATIONS / "token_embedding" / "correct" / "indexing.py").read_text()
    path = tmp_path / "layers.py"
    path.write_text("from torch.nn import Embedding as _LibraryEmbedding  # left over, never used\n" + source)
    (result,) = grade_file(path, "token_embedding",
                           checks=["no_library_embedding_source", "unused_forbidden_import"])
    by_id = {c.id: c for c in result.checks}
    assert by_id["no_library_embedding_source"].status == "passed", by_id["no_library_embedding_source"].message
    advice = by_id["unused_forbidden_import"]
    assert advice.status == "advisory" and advice.score == 0 and "never uses it" in advice.message


NEW_EVASIONS = [
    ("token_embedding", "thread_hides_library_lookup.py", ["no_library_embedding_runtime"]),
    ("embedding_backward", "popped_modes_dense_backward.py", ["no_library_embedding_runtime"]),
    ("token_embedding", "embedding_bag_forward.py", ["no_library_embedding_runtime", "no_library_embedding_source"]),
    ("embedding_backward", "embedding_bag_dense_backward.py", ["no_library_embedding_runtime"]),
    ("token_embedding", "decoy_parameters.py", ["init_distribution"]),
    ("token_embedding", "init_special_cases_probe_shape.py", ["init_distribution"]),
    ("token_embedding", "init_all_nan.py", ["init_independent", "init_reproducible"]),
    ("token_embedding", "loop_unless_observed.py", ["speed"]),
    ("token_embedding", "loop_over_vocabulary.py", ["vectorised"]),
    ("token_embedding", "utf7_cookie_hides_lookup.py", ["no_library_embedding_source"]),
]


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,name,must", NEW_EVASIONS, ids=[n for _, n, _ in NEW_EVASIONS])
def test_each_evasion_is_caught_by_the_check_it_evades(challenge, name, must):
    path = IMPLEMENTATIONS / challenge / "broken" / name
    (result,) = grade_file(path, challenge)
    _assert_caught_within(path, result, must=must)


# -- drawn sizes and sampled outputs are validated when the spec loads ----------------------------------
def test_drawn_sizes_are_validated_and_drawn_from_the_seed():
    import random

    from validator.checks.performance import Size

    size = Size(dims={"num_embeddings": [10, 20], "embedding_dim": 4}, shapes={"token_ids": [[2, 3], 8]})
    draws = {tuple(sorted(size.draw(random.Random(s))[0].items())) for s in range(20)}
    assert len(draws) > 1 and all(10 <= dict(d)["num_embeddings"] <= 20 for d in draws)
    assert size.draw(random.Random(5)) == size.draw(random.Random(5))
    assert all(s[1] == 8 and 2 <= s[0] <= 3 for s in (size.draw(random.Random(i))[1]["token_ids"] for i in range(9)))
    with pytest.raises(ValidationError, match="low, high"):
        Size(dims={"num_embeddings": [20, 10]})


def test_sample_output_needs_an_entry_called_with_token_ids(tmp_path):
    from validator.spec import SpecError, load_challenge

    spec = tmp_path / "c.yaml"
    spec.write_text("""\
id: c
title: C
entries:
  f: {kind: function, call: [x]}
dims: {n: [1, 4]}
inputs:
  x: {type: float, shape: [n]}
checks:
  - {id: init, kind: init, test: init_independent, parameter: w, sample: output}
""")
    with pytest.raises(SpecError, match="sample: output"):
        load_challenge(spec)
