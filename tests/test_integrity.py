"""Evidence a submission cannot fake (issue 9): the integrity scan, tamper detection, op families, review marks."""

from __future__ import annotations

import ast
import threading

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from torch.utils._python_dispatch import TorchDispatchMode

from helpers import IMPLEMENTATIONS, code_checks, describe_failures, grade_file
from validator import runner
from validator.checks.constraint import forbidden_in
from validator.integrity import decode_source, scan_package, scan_source, scan_submission
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
    ("import importlib.metadata\nm = importlib.import_module('torch')\n", 2, "dynamic_code"),
    ("import importlib.util as u\ns = u.spec_from_file_location('m', 'm.py')\n", 2, "dynamic_code"),
    ("from importlib.metadata import entry_points\neps = entry_points()\n", 2, "dynamic_code"),
    ("import importlib.metadata as md\nread = md\n", 2, "dynamic_code"),
    ("from importlib.resources import files\nname = 'p' + 'kg'\nroot = files(name)\n", 3, "dynamic_code"),
    ("import importlib.resources as r\nreader = r.files\n", 2, "dynamic_code"),
    # find_spec kept, called with a computed name, or its spec used: not a probe
    ("import importlib.util\nspec = importlib.util.find_spec('torch')\n", 2, "dynamic_code"),
    ("import importlib.util\nname = 'to' + 'rch'\nok = importlib.util.find_spec(name) is not None\n", 3,
     "dynamic_code"),
    ("from importlib.util import find_spec\nloader = find_spec('torch').loader\n", 2, "dynamic_code"),
    ("import torch\nm = torch._C._get_dispatch_mode(None)\n", 2, "torch_internals"),
    ("from torch.utils._python_dispatch import _pop_mode\n_pop_mode()\n", 2, "torch_internals"),
    ("import torch\nf = torch.overrides.get_ignored_functions\n", 2, "torch_internals"),
    ("import torch\np = torch.profiler.profile()\n", 2, "torch_internals"),
    ("from torch.autograd import profiler\nprofiler.profile().__exit__(None, None, None)\n", 2, "torch_internals"),
    ("import gc\ngc.get_objects()\n", 2, "gc"),
    ("import inspect\ninspect.stack()\n", 2, "inspect"),
    ("import sys\nf = sys._getframe(1)\n", 2, "frames"),
    ("import torch.nn.functional as F\nname = 'embed' + 'ding'\nf = getattr(F, name)\n", 3, "computed_getattr"),
])
def test_constructs_are_found_with_their_line(src, line, what):
    assert (line, what) in _whats(scan_source(src, BANNED))


@pytest.mark.parametrize("src", [
    'import importlib.metadata\n\n__version__ = importlib.metadata.version("cs336_basics")\n',  # CS336's __init__.py
    'from importlib.metadata import PackageNotFoundError, version\ntry:\n    v = version("x")\n'
    'except PackageNotFoundError:\n    v = None\n',
    'from importlib import metadata\nv = metadata.version("x")\n',
    'import importlib.metadata\n',
    'import importlib.resources\ntext = importlib.resources.files(__package__).joinpath("vocab.txt").read_text()\n',
    'from importlib.resources import files\ntext = (files("cs336_basics") / "vocab.txt").read_text()\n',
    # a switch to a compiled backend (a real repository's BPE merges): one bool, nothing run
    'import importlib.util\nnative_available = importlib.util.find_spec("cs336_native") is not None\n',
    'from importlib.util import find_spec\nif find_spec("triton") is None:\n    triton = None\n',
    'from torch.profiler import record_function\ndef f(x):\n    with record_function("qkv"):\n        return x\n',
    'import torch\ndef f(x):\n    with torch.autograd.profiler.record_function("qkv"):\n        return x\n',
    'import torch\nACTIVITY = torch.profiler.ProfilerActivity.CPU\n',
], ids=["cs336_version", "version_or_none", "from_importlib", "unused", "own_resources", "literal_resources",
        "probe", "probe_from_import", "record_function", "autograd_record_function", "profiler_activity"])
def test_reading_package_metadata_and_resources_is_not_dynamic_code(src):
    assert scan_source(src, BANNED) == []


def test_a_module_a_resource_read_names_is_scanned_like_an_import():
    files = {"pkg/__init__.py": b'import importlib.metadata\n__version__ = importlib.metadata.version("pkg")\n',
             "pkg/model.py": b'from importlib.resources import files\nVOCAB = files("pkg.data").joinpath("v.txt")\n',
             "pkg/data/__init__.py": b"import threading\nthreading.Thread(target=print).start()\n"}
    found = scan_package(files, ["pkg.model"], [])
    assert [(f.file, f.line, f.what) for f in found] == [("pkg/data/__init__.py", 2, "threads")]


def test_a_probe_for_a_dotted_module_scans_its_parent_like_an_import():
    """``find_spec("pkg.fast") is None`` imports ``pkg`` to search it: that package is followed like an import."""
    files = {"pkg/__init__.py": b"import threading\nthreading.Thread(target=print).start()\n",
             "layers.py": b'import importlib.util\nFAST = importlib.util.find_spec("pkg.fast") is not None\n'}
    found = scan_package(files, ["layers"], [])
    assert [(f.file, f.line, f.what) for f in found] == [("pkg/__init__.py", 2, "threads")]


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
    (tmp_path / "unrelated.py").write_text("import gc\ngc.collect()\n")  # not imported: scanned, advice only
    found = scan_submission(tmp_path / "layers.py", BANNED)
    assert [(f.file, f.line, f.what, f.reachable) for f in found] == [
        ("helper.py", 4, "torch.nn.functional.embedding", True), ("unrelated.py", 2, "gc", False)]


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


class _Idiom(torch.nn.Module):
    """A correct little layer around one idiom, with a parameter and a buffer as real layers have."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 4))
        self.register_buffer("scale", torch.full((4,), 0.5), persistent=False)

    def forward(self, x):
        return self.body(self, x)


def _rms_norm_llama(self, x):  # LLaMA's RMSNorm: the statistics in float32, cast back with type_as
    h = x.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight).type_as(x)


def _heads(self, x):  # einops.rearrange("b s (h d) -> b h s d") and back, as views and permutes
    q = x.view(*x.shape[:-1], 2, 2).permute(0, 2, 1, 3)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, q) * q.shape[-1] ** -0.5
    keep = torch.tril(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device))
    scores = scores.masked_fill(~keep, float("-inf"))
    probs = torch.exp(scores - scores.amax(-1, keepdim=True))
    probs = probs / probs.sum(-1, keepdim=True)
    return (probs @ q).transpose(1, 2).contiguous().view(x.shape) * self.weight


# Idioms of correct layers (name -> body(self, x) for x of shape (2, 3, 4)); none may read as tampering.
IDIOMS = {
    "type_as_same_dtype": lambda self, x: (x * self.weight).type_as(x),
    "rms_norm_llama_type_as": _rms_norm_llama,
    "to_same_dtype": lambda self, x: (x * self.weight).to(torch.float32),
    "to_dtype_of": lambda self, x: (x * self.weight).to(x.dtype),
    "to_device_of": lambda self, x: x.to(x.device) * self.weight,
    "to_other_tensor": lambda self, x: x.to(self.weight) * self.weight,
    "float_on_float32": lambda self, x: x.float() * self.weight,
    "contiguous_on_contiguous": lambda self, x: x.contiguous() * self.weight,
    "reshape_view_flatten": lambda self, x: (x.reshape(6, 4).view(2, 3, 4).flatten(0, 1) * self.weight).view(x.shape),
    "expand_unsqueeze_squeeze": lambda self, x: x * self.weight.unsqueeze(0).unsqueeze(0).expand(2, 3, 4).squeeze(0),
    "rearrange_heads": _heads,
    "permute_movedim_transpose_T": lambda self, x: (x.permute(2, 0, 1).movedim(0, -1).transpose(0, 1).mT.mT
                                                    .transpose(0, 1)) * self.weight,
    "detach_in_a_statistic": lambda self, x: x * self.weight / x.detach().abs().amax(),
    "clone": lambda self, x: x.clone() * self.weight,
    "ellipsis_and_none_index": lambda self, x: x[...] * self.weight[None, None, :],
    "slices": lambda self, x: torch.cat([x[..., :2], x[..., 2:]], -1) * self.weight,
    "einsum": lambda self, x: torch.einsum("bsd,d->bsd", x, self.weight),
    "matmul_operator": lambda self, x: x @ torch.diag(self.weight).to(x.dtype),
    "silu_and_sigmoid": lambda self, x: torch.nn.functional.silu(x) * torch.sigmoid(x) * self.weight,
    "where": lambda self, x: torch.where(x > 0, x, 0.0) * self.weight,
    "masked_fill": lambda self, x: x.masked_fill(x > 1, float("-inf")).exp() * self.weight,
    "finfo": lambda self, x: x.clamp(min=torch.finfo(x.dtype).min) * self.weight,
    "new_tensor_new_zeros_new_ones": lambda self, x: (x + x.new_zeros(x.shape) + x.new_ones(4)) * x.new_tensor(2.0)
                                                     * self.weight,
    "tensor_literal": lambda self, x: x * torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=x.dtype, device=x.device)
                                      * self.weight,
    "arange_on_input_device": lambda self, x: x * torch.arange(4, device=x.device) * self.weight,
    "registered_buffer": lambda self, x: x * self.scale * self.weight,
    "chunk_split_unbind_stack": lambda self, x: torch.stack(x.chunk(2, -1)[0].unbind(-1) + x.split(2, -1)[1].unbind(-1),
                                                            -1) * self.weight,
    "index_tensor_and_gather": lambda self, x: x[:, torch.tensor([2, 0, 1])].gather(
        -1, torch.arange(4).expand(2, 3, 4)) * self.weight,
    "upcast_roundtrip": lambda self, x: x.double().float().to(torch.bfloat16).to(torch.float32) * self.weight,
    "logsumexp_and_max": lambda self, x: (x - torch.logsumexp(x, -1, keepdim=True) - x.max(-1, keepdim=True).values)
                                         * self.weight,
    "dropout_eval": lambda self, x: torch.nn.functional.dropout(x, 0.1, training=False) * self.weight,
    "rope_pairs": lambda self, x: torch.stack([x[..., 0::2] * torch.cos(x[..., 1::2]),
                                               x[..., 1::2] * torch.sin(x[..., 0::2])], -1).flatten(-2) * self.weight,
    "complex_rope": lambda self, x: torch.view_as_real(torch.view_as_complex(x.float().reshape(2, 3, 2, 2))
                                                       * torch.polar(torch.ones(2), torch.arange(2.0))
                                                       ).flatten(-2).type_as(x) * self.weight,
    "empty_like_filled": lambda self, x: torch.empty_like(x).copy_(x) * self.weight,
}


def _run_idiom(body, dtype):
    call = {"entry": "L", "kind": "module", "init_args": [body], "want": ["output", "param_grads"], "trace_ops": True,
            "inputs": [{"value": torch.randn(2, 3, 4, dtype=dtype), "requires_grad": True}],
            "grad_output": torch.ones(2, 3, 4, dtype=dtype)}
    return runner.execute({"L": _Idiom}, call)


def _tamper_reports(names, dtypes) -> dict:
    wrong = {}
    for dtype in dtypes:
        for name in names:
            result = _run_idiom(IDIOMS[name], dtype)
            if not result["ok"]:
                wrong[f"{name} ({dtype})"] = result["exception"]["message"][:200]
            elif result["tampered"] or result["param_grads"]["weight"] is None:
                wrong[f"{name} ({dtype})"] = result["tampered"] or "no gradient reached the weight"
    return wrong


def test_type_as_and_no_op_casts_are_not_tampering():
    """Composite ops that decompose into nothing never reach the dispatch-mode recorder: not tampering."""
    names = ["type_as_same_dtype", "rms_norm_llama_type_as", "to_same_dtype", "float_on_float32",
             "contiguous_on_contiguous"]
    assert _tamper_reports(names, [torch.float32]) == {}


@pytest.mark.thorough
def test_idioms_of_correct_layers_are_not_tampering():
    """Ops that legitimately never reach the recorder (composite ops that decompose into nothing or into views,
    views, factories) are told apart from ops run while it was off: forward and backward, float32 and bfloat16."""
    assert _tamper_reports(IDIOMS, [torch.float32, torch.bfloat16]) == {}


def test_ops_that_may_skip_the_recorder_are_derived_from_torch():
    for op in ("type_as", "to", "contiguous", "reshape", "view", "expand", "detach", "alias", "lift_fresh",
               "detach_", "einsum", "empty"):
        assert runner._may_skip_recorder(f"aten::{op}"), op
    for op in ("embedding", "embedding_dense_backward", "_softmax", "softmax", "index_select", "index_add_", "mm",
               "_to_copy", "copy_", "mul", "zeros", "no_such_op"):
        assert not runner._may_skip_recorder(f"aten::{op}"), op


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


def _dispatch_off():
    return torch._C._DisableTorchDispatch()


def _python_key_excluded():
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python))


class _SwallowingMode(TorchDispatchMode):
    """A mode of the student's own, pushed above the recorder, that runs every op with dispatch off."""

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # as the recorder does: keeps torch from importing dynamo (seconds) for this test

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        with _dispatch_off():
            return func(*args, **(kwargs or {}))


class _HiddenBackward(torch.autograd.Function):
    """An honest forward; the backward runs the library's embedding backward with the recorder off."""

    @staticmethod
    def forward(ctx, ids, w):
        ctx.save_for_backward(ids)
        ctx.rows = w.shape[0]
        return w[ids]

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        with _dispatch_off():
            return None, torch.ops.aten.embedding_dense_backward(grad.contiguous(), ids, ctx.rows, -1, False)


class _HiddenBackwardCast(torch.autograd.Function):
    """The backward hides a hand-written scatter under dispatch off, then a no-op type_as (which may vanish)."""

    @staticmethod
    def forward(ctx, ids, w):
        ctx.save_for_backward(ids)
        ctx.rows = w.shape[0]
        return w[ids]

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        with _dispatch_off():
            return None, torch.zeros(ctx.rows, grad.shape[-1]).index_add_(0, ids, grad).type_as(grad)


def _with(guard, fn):
    def run(ids, w):
        with guard():
            return fn(ids, w)
    return run


# attack -> an op the profiler must name as unseen
BYPASSES = {
    "dispatch_disabled": (_with(_dispatch_off, F.embedding), "aten.embedding"),
    "python_key_excluded": (_with(_python_key_excluded, F.embedding), "aten.embedding"),
    "composite_op_with_dispatch_off": (_with(_dispatch_off, lambda ids, w: torch.softmax(w[ids], -1)), "aten.softmax"),
    "no_op_cast_around_a_hidden_op": (_with(_dispatch_off, lambda ids, w: torch.softmax(w[ids], -1).type_as(w)),
                                      "aten.softmax"),
    "own_mode_above_the_recorder": (_with(_SwallowingMode, F.embedding), "aten.embedding"),
    "backward_with_dispatch_off": (_HiddenBackward.apply, "aten.embedding_dense_backward"),
    "backward_hidden_before_a_no_op_cast": (_HiddenBackwardCast.apply, "aten.index_add_"),
}


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_ops_run_with_the_recorder_off_are_tampered_evidence(name):
    fn, op = BYPASSES[name]
    result = _traced(fn)
    assert result["ok"], result
    assert any("never saw" in t and op in t for t in result["tampered"]), result["tampered"]


def test_ops_run_with_torch_function_disabled_still_reach_the_recorder():
    """DisableTorchFunction(Subclass) hides nothing from the dispatch-mode recorder: the op is counted, not missed."""
    for guard in (torch._C.DisableTorchFunction, torch._C.DisableTorchFunctionSubclass):
        result = _traced(_with(guard, F.embedding))
        assert result["tampered"] == [] and "aten.embedding" in result["ops"], result


def test_the_event_tree_and_the_event_list_judge_every_traced_run_alike(monkeypatch, request):
    """profiled_ops reads torch's event tree where torch builds one; the event list nested by time
    (runner._ops_in_rows) is what it falls back on. Both must give the same unseen ops and op counts on honest
    idioms (float32 and bfloat16) and on every way around the recorder known here; a torch whose tree reads
    otherwise fails this test rather than a student. (In this round's check of the mutant library and a
    generated class, 2,864 traced runs, the two agreed on all.)"""
    compared = []
    tree_read = runner.profiled_ops

    def both(profiler, marker):
        got = tree_read(profiler, marker)
        assert runner._event_tree(profiler) is not None  # this torch builds the tree: it is what was read
        assert got == runner._ops_in_rows(profiler, marker)
        compared.append(got)
        return got

    monkeypatch.setattr(runner, "profiled_ops", both)
    idioms = sorted(IDIOMS) if request.config.getoption("--thorough") else [
        "type_as_same_dtype", "rms_norm_llama_type_as", "complex_rope", "empty_like_filled"]
    assert _tamper_reports(idioms, [torch.float32, torch.bfloat16]) == {}
    for name, (fn, op) in sorted(BYPASSES.items()):
        result = _traced(fn)
        assert any("never saw" in t and op in t for t in result["tampered"]), (name, result["tampered"])
    assert len(compared) == 2 * len(idioms) + len(BYPASSES)
    assert any(unseen for unseen, _ in compared) and all(counts for _, counts in compared)


def test_a_tree_that_reads_otherwise_falls_back_on_the_event_list(monkeypatch):
    """Another torch's tree events without the names or children read here: the event list judges the run, and
    the honest layer is not accused (a profiler that 'recorded nothing' would be)."""
    class Odd:
        tag = None

    monkeypatch.setattr(runner, "_event_tree", lambda profiler: [Odd()])
    result = _run_idiom(IDIOMS["type_as_same_dtype"], torch.float32)
    assert result["ok"] and result["tampered"] == [], result
    assert _traced(BYPASSES["dispatch_disabled"][0])["tampered"]  # and the list still names a bypass


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


# -- the allowlist: a scan that allows rather than forbids (issue 21) ----------------------------------------------
from validator.integrity import DEFAULT_POLICY, Allowlist, allows  # noqa: E402

SOFTMAX = ["torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax", "torch.nn.Softmax",
           "torch.Tensor.softmax", "torch.ops.aten.*softmax*"]
EMBEDDING = BANNED + ["torch._embedding_bag*"]


def _costly(findings):
    """(line, what) of the findings that cost points and mark the submission for review."""
    return [(f.line, f.what) for f in findings if not f.advice_only and f.review]


# each attack: source, bans, (line, what) it must be caught as
ATTACKS = {
    "tensor_method": ("import torch\n\ndef softmax(x, dim):\n    return x.softmax(dim)\n", SOFTMAX,
                      (4, "torch.Tensor.softmax")),
    "tensor_class_method": ("import torch\n\ndef softmax(x, dim):\n    return torch.Tensor.softmax(x, dim)\n",
                            SOFTMAX[:4] + SOFTMAX[5:], (4, "torch.Tensor.softmax")),
    "getattr_on_module_alias": ("import torch\nalias = torch.nn.functional\n\ndef softmax(x, dim):\n"
                                "    return getattr(alias, 'soft' + 'max')(x, dim)\n", SOFTMAX,
                                (5, "computed_getattr")),
    "getattr_on_tensor_folded": ("def softmax(x, dim):\n    return getattr(x, 'xamtfos'[::-1])(dim)\n", SOFTMAX,
                                 (2, "torch.Tensor.softmax")),
    "getattr_loop_over_names": ("def softmax(x, dim):\n    for n in ('soft' + 'max',):\n        f = getattr(x, n)\n"
                                "    return f(dim)\n", SOFTMAX, (3, "torch.Tensor.softmax")),
    "getattr_unreadable_constant": ("def softmax(x, dim):\n    return getattr(x, ''.join(map(str.lower, 'SOFTMAX')))(dim)\n",
                                    SOFTMAX, (2, "computed_getattr")),
    "timeit_setup": ("import timeit\n\ndef softmax(x, dim):\n    box = {}\n"
                     "    timeit.Timer(setup='box[0] = x.softmax(dim)', globals=locals()).timeit(1)\n"
                     "    return box[0]\n", SOFTMAX, (5, "dynamic_code")),
    "code_interpreter": ("import code\n\ndef softmax(x, dim):\n    shell = code.InteractiveInterpreter({'x': x})\n"
                         "    shell.runsource('y = x.exp()')\n    return shell.locals['y']\n", SOFTMAX, (4, "dynamic_code")),
    "pkgutil_resolve_name": ("import pkgutil\n\ndef softmax(x, dim):\n"
                             "    return pkgutil.resolve_name('torch.nn.functional:softmax')(x, dim)\n", SOFTMAX,
                             (4, "dynamic_code")),
    "runpy": ("import runpy\n\ndef softmax(x, dim):\n    return runpy.run_path('h.py')['f'](x)\n", SOFTMAX,
              (4, "dynamic_code")),
    "exec_of_a_file": ("def softmax(x, dim):\n    exec(open('h.py').read())\n    return x\n", SOFTMAX, (2, "dynamic_code")),
    "methodcaller": ("import operator\n\ndef softmax(x, dim):\n    return operator.methodcaller('softmax', dim)(x)\n",
                     SOFTMAX, (4, "torch.Tensor.softmax")),
    "class_dict": ("def softmax(x, dim):\n    return type(x).__dict__['softmax'](x, dim)\n", SOFTMAX,
                   (2, "computed_getattr")),
    "torch_private_namespace": ("import torch\n\ndef lookup(ids, w):\n    return torch._VF.embedding(w, ids)\n",
                                EMBEDDING, (4, "not_allowed")),
    "torch_namespace_not_listed": ("import torch\n\ndef lookup(ids, w):\n    return torch.hub.load('.', 'e', source='local')(ids, w)\n",
                                   EMBEDDING, (4, "not_allowed")),
    "reexported_torch": ("import torch.nn.functional as F\n\ndef lookup(ids, w):\n    return F.torch.embedding(w, ids)\n",
                         EMBEDDING, (4, "torch.embedding")),
    "module_in_a_container": ("import torch\n\ndef lookup(ids, w):\n    ns = [torch.nn.functional][0]\n"
                              "    return ns.embedding(ids, w)\n", EMBEDDING, (4, "module_value")),
    "module_variable_attribute": ("import torch\n\ndef lookup(ids, w, ns=None):\n    ns = ns or torch.nn.functional\n"
                                  "    return ns.embedding(ids, w)\n", EMBEDDING, (5, "torch.nn.functional.embedding")),
    "jaxtyping_shape_runs_code": ("import torch\nfrom jaxtyping import Float\n\ndef lookup(ids, w):\n"
                                  "    assert isinstance(w, Float[torch.Tensor, \"v d+0*len(str(exec('1')))\"])\n"
                                  "    return w[ids]\n", EMBEDDING, (5, "dynamic_code")),
    "string_annotation_runs_code": ("def lookup(ids: \"__import__('os').getpid()\", w):\n    return w[ids]\n",
                                    EMBEDDING, (1, "dynamic_code")),
    "module_named_main": ("import unittest.__main__  # noqa\n", EMBEDDING, (1, "dynamic_code")),
    "not_listed_module": ("import shelve\n\ndef lookup(ids, w):\n    return shelve.open('w')['w'][ids]\n", EMBEDDING,
                          (4, "not_allowed")),
    "os_beyond_its_names": ("import os\n\ndef lookup(ids, w):\n    os.execv('/bin/true', ['true'])\n", EMBEDDING,
                            (4, "processes")),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_each_attack_is_a_finding_with_its_line_that_marks_review(name):
    source, banned, hit = ATTACKS[name]
    assert hit in _costly(scan_source(source, banned)), [f.describe() for f in scan_source(source, banned)]


def test_a_folded_name_is_never_computed_beyond_a_bound():
    found = scan_source("def f(x):\n    return getattr(x, 'a' * 1000000000 + 'b' * (10 ** 9))\n", SOFTMAX)
    assert _costly(found) == [(2, "computed_getattr")]


HONEST = '''\
from __future__ import annotations

import math
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass
from typing import Optional

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from einops import rearrange
from jaxtyping import Float, Int
from pydantic import BaseModel, Field
from torch import Tensor, nn

ROOT = os.path.join(os.path.dirname(__file__), "data")
VERBOSE = os.environ.get("VERBOSE") == "1" and sys.version_info >= (3, 10)


@dataclass
class Config:
    d_model: int = 8
    names: Optional[list[str]] = None


class ModelConfig(BaseModel):  # a model's configuration as a pydantic model
    rope_theta: float = Field(default=10000.0)


class Attention(nn.Module):
    def __init__(self, d_model: int, device=None, dtype=None):
        super().__init__()
        self.q = nn.Parameter(torch.empty(d_model, d_model, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.q, std=1 / math.sqrt(d_model))
        self.heads = nn.ModuleDict(OrderedDict(a=nn.Identity()))
        for i in range(2):
            setattr(self, f"w{i}", nn.Parameter(torch.ones(d_model)))

    def softmax(self, x: Float[Tensor, "... d"], dim: int) -> Float[Tensor, "... d"]:
        e = torch.exp(x - x.amax(dim=dim, keepdim=True))
        return e / e.sum(dim=dim, keepdim=True)

    def forward(self, x: Float[Tensor, "b s d"], mask: Int[Tensor, "s s"] | None = None) -> Float[Tensor, "b s d"]:
        twice: Float[Tensor, "b s 2_d"] = torch.cat([x, x], dim=-1)  # a dim that is no Python: jaxtyping runs nothing
        scores = torch.einsum("bsd,btd->bst", x @ self.q, twice[..., : x.shape[-1]]) / math.sqrt(x.shape[-1])
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        probs = self.softmax(scores, -1)
        out = rearrange(probs @ x, "b s d -> b s d") * getattr(self, "w0") * self.w1
        return F.dropout(out, 0.0, self.training) * np.float32(1.0)


def to_tensor(array: npt.NDArray[np.float32]) -> torch.Tensor:
    return torch.as_tensor(array)
'''


def test_an_honest_layer_with_the_usual_imports_is_clean():
    assert scan_source(HONEST, SOFTMAX) == [], [f.describe() for f in scan_source(HONEST, SOFTMAX)]


@pytest.mark.parametrize("name,allowed", [
    ("torch.nn.functional.gelu", True), ("torch.nn.init.trunc_normal_", True), ("torch.nn.modules.module.Module", True),
    ("torch.Tensor.masked_fill", True), ("torch.autograd.Function", True), ("os.path.join", True),
    ("os.environ", True), ("numpy.typing.NDArray", True), ("collections.abc.Sequence", True),
    ("importlib.metadata.version", True), ("einops.layers.torch.Rearrange", True), ("pydantic.Field", True),
    ("pydantic.BaseModel", True), ("pydantic.ImportString", False),
    # a logger module of a real repository: rich's handler, an omegaconf config (a review flag in 8 challenges)
    ("rich.logging.RichHandler", True), ("omegaconf.DictConfig", True), ("tqdm.tqdm", True),
    ("hydra.utils.instantiate", False), ("transformers.models.llama.modeling_llama.LlamaRMSNorm", False),
    ("os.system", False), ("os.path.os.system", False), ("torch.nn.functional.torch.hub.load", False),
    ("torch.hub.load", False), ("torch._VF.embedding", False), ("torch.nn.functional._canonical_mask", False),
    ("torch.load", False), ("torch.compile", False), ("torch.utils.cpp_extension.load_inline", False),
    ("torch.ops.aten.embedding", False), ("numpy.ctypeslib.load_library", False), ("numpy.load", False),
    ("scipy.special.softmax", False), ("importlib.import_module", False),
])
def test_names_are_judged_by_what_they_are(name, allowed):
    assert allows(DEFAULT_POLICY, name) is allowed


def test_a_spec_extends_or_narrows_the_default():
    wider = Allowlist.changed(add=("scipy.special", "torch.compile"))
    assert allows(wider, "scipy.special.expit") and allows(wider, "torch.compile")
    narrower = Allowlist.changed(remove=("numpy", "torch.nn.functional.dropout"))
    assert not allows(narrower, "numpy.float32") and not allows(narrower, "torch.nn.functional.dropout")
    assert allows(narrower, "torch.nn.functional.gelu")
    assert Forbidden(allowed={"add": ["scipy.special"]}).allowlist() == wider.changed(add=("scipy.special",))
    with pytest.raises(ValidationError, match="removing it does nothing"):
        Forbidden(allowed={"remove": ["scipy"]})
    with pytest.raises(ValidationError, match="allowlist entries"):
        Forbidden(allowed={"add": ["scipy special"]})


def test_a_construct_the_challenge_allows_allows_its_modules():
    assert scan_source("import threading\nlock = threading.Lock()\n", [], allow={"threads"}) == []


def test_a_helper_loaded_through_pkgutil_is_scanned_and_the_load_is_the_finding(tmp_path):
    (tmp_path / "layers.py").write_text("import pkgutil\n\ndef lookup(ids, w):\n"
                                        "    return pkgutil.resolve_name('hidden:lookup')(ids, w)\n")
    (tmp_path / "hidden.py").write_text("import torch.nn.functional as F\n\ndef lookup(ids, w):\n"
                                        "    return F.embedding(ids, w)\n")
    found = sorted(scan_submission(tmp_path / "layers.py", BANNED, entries=["lookup"]), key=lambda f: f.file)
    assert [(f.file, f.line, f.what, f.reachable) for f in found] == [
        ("hidden.py", 4, "torch.nn.functional.embedding", False), ("layers.py", 4, "dynamic_code", True)]
    assert "pkgutil.resolve_name" in found[1].describe() and found[1].review


def test_every_file_of_a_package_is_scanned_and_one_no_import_names_is_advice():
    files = {"pkg/__init__.py": b"", "pkg/model.py": b"import torch\n\ndef lookup(ids, w):\n    return w[ids]\n",
             "pkg/hidden.py": b"import torch.nn.functional as F\nF.embedding\n", "pkg/broken.py": b"def f(:\n"}
    found = scan_package(files, ["pkg.model"], BANNED, entries=[("pkg.model", "lookup")])
    assert [(f.file, f.line, f.what, f.reachable) for f in found] == [
        ("pkg/hidden.py", 2, "torch.nn.functional.embedding", False)]


def test_a_file_that_does_not_parse_costs_nothing_unless_importing_the_graded_module_runs_it():
    """A tokenizer under syntax newer than the grader's Python, imported inside an ungraded function, must not fail
    every source check (seen on a real CS336 repository: 9 points); the worker cannot compile it either, so it runs
    nowhere. A file that importing the graded module runs (itself, a package __init__, an import at the top of one
    of them) that does not parse still cannot be checked."""
    from validator.integrity import Unreadable

    files = {"pkg/__init__.py": b"", "pkg/bpe.py": b"type Pairs = dict[tuple[int, int], int]\ndef f(:\n",
             "pkg/model.py": b"import torch\n\ndef lookup(ids, w):\n    return w[ids]\n\n"
                             b"def train_bpe():\n    from pkg import bpe\n    return bpe\n"}
    assert scan_package(files, ["pkg.model"], BANNED, entries=[("pkg.model", "lookup")]) == []
    with pytest.raises(Unreadable, match="pkg/__init__.py does not parse"):
        scan_package({**files, "pkg/__init__.py": b"def f(:\n"}, ["pkg.model"], BANNED,
                     entries=[("pkg.model", "lookup")])
    with pytest.raises(Unreadable, match="pkg/model.py does not parse"):
        scan_package({**files, "pkg/model.py": files["pkg/model.py"] + b"def g(:\n"}, ["pkg.model"], BANNED)
    # a module only a function imports may import it at its top: nothing the graded module runs does
    lazily = {**files, "pkg/encode.py": b"from pkg.bpe import Pairs\n",
              "pkg/model.py": files["pkg/model.py"] + b"\ndef encoder():\n    from pkg import encode\n"}
    assert scan_package(lazily, ["pkg.model"], BANNED, entries=[("pkg.model", "lookup")]) == []
    # a file the scan cannot decode is not one the worker cannot run: never left out, however it is imported
    with pytest.raises(Unreadable, match="pkg/bpe.py: invalid or missing encoding declaration"):
        scan_package({**files, "pkg/bpe.py": b"X = '\xff\xfe'\n"}, ["pkg.model"], BANNED,
                     entries=[("pkg.model", "lookup")])
    for importing in (b"from . import bpe\n", b"from pkg.bpe import Pairs\n", b"import pkg.bpe\n"):  # runs on import
        with pytest.raises(Unreadable, match="pkg/bpe.py does not parse"):
            scan_package({**files, "pkg/model.py": importing + files["pkg/model.py"]}, ["pkg.model"], BANNED)


def test_own_attributes_are_the_students_names_and_a_tensor_subclass_is_a_tensor():
    adapter = "def run(model, x):\n    return model.softmax(x, -1)\n"
    model = "class M:\n    def softmax(self, x, dim):\n        return x\n"
    assert _costly(scan_source(adapter, SOFTMAX)) == [(2, "torch.Tensor.softmax")]
    assert scan_source(adapter + model, SOFTMAX) == []
    subclass = "import torch\n\nclass T(torch.Tensor):\n    def probs(self):\n        return self.softmax(-1)\n"
    assert _costly(scan_source(subclass, SOFTMAX)) == [(5, "torch.Tensor.softmax")]


def test_the_challenge_page_lists_what_a_solution_may_use():
    from helpers import catalogue
    from validator.instructor.docs import challenge_page

    challenge = catalogue()["softmax"]
    page = challenge_page(challenge, {})
    assert "### What your code may use" in page and "`torch.nn.functional`" in page and "`einops`" in page
    assert "`torch.load`" in page.split("not allowed even so")[1]
    wider = challenge.model_copy(update={"forbidden": challenge.forbidden.model_copy(
        update={"allowed": challenge.forbidden.allowed.model_copy(update={"add": ["scipy.special"]})})})
    assert "`scipy.special`" in challenge_page(wider, {})


def test_what_importing_a_module_runs_is_judged_for_constructs_not_for_the_allowlist():
    """A module the adapters import for another test sets up logging (loguru) and a device helper (torch.cuda as a
    value) when it is imported (a real repository lost 10 points and was sent for review). The allowlist says what
    a solution may use: judged in the code the layer's own calls name, advice in what importing runs besides.
    Constructs (here a thread) stay judged wherever they run; the layer's own use of loguru is judged too."""
    files = {"pkg/__init__.py": b"",
             "pkg/setup.py": b"import threading\nimport torch\nfrom loguru import logger\nlogger.info('ready')\n"
                             b"threading.Thread(target=print).start()\n\ndef accel():\n    return torch.cuda\n\n"
                             b"ACCEL = accel()\n",
             "pkg/model.py": b"import torch\nfrom pkg import setup\nfrom loguru import logger\n\n"
                             b"def lookup(ids, w):\n    return w[ids]\n\ndef logged(ids, w):\n    logger.info('x')\n"
                             b"    return w[ids]\n"}
    found = scan_package(files, ["pkg.model"], BANNED, entries=[("pkg.model", "lookup")])
    assert sorted((f.file, f.line, f.what, f.reachable) for f in found) == [
        ("pkg/model.py", 9, "not_allowed", False),  # a function the layer never calls
        ("pkg/setup.py", 4, "not_allowed", False), ("pkg/setup.py", 5, "threads", True),
        ("pkg/setup.py", 8, "module_value", False)], found
    found = scan_package(files, ["pkg.model"], BANNED, entries=[("pkg.model", "logged")])
    assert ("pkg/model.py", 9, "not_allowed", True) in [(f.file, f.line, f.what, f.reachable) for f in found], found
