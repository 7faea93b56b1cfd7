"""The student loop's speed-ups change the time a run takes and nothing else.

Each cut in `benchmarks/bench_submit.py`'s figures skips work torch or the grader would
have done for nothing; these tests pin that the work is skipped and that what the grader
sees (gradients, findings, cases) is what it saw before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from validator import integrity, runner

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


class _Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def test_backward_gives_the_gradients_tensor_backward_gives():
    graphs = [
        lambda x, w: (x @ w).tanh(),
        lambda x, w: (x[:, :2] * w[0, :2]).exp(),  # a non-contiguous path
        lambda x, w: _Double.apply(x) @ w,        # a hand-written backward
    ]
    for build in graphs:
        grads = []
        for backward in (lambda out, g: out.backward(g), runner._backward):
            torch.manual_seed(0)
            x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
            w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
            out = build(x, w)
            g = torch.randn(out.shape, dtype=torch.float64).t().contiguous().t()  # a strided gradient too
            backward(out, g)
            grads.append((x.grad.clone(), w.grad.clone() if w.grad is not None else None))
        (x1, w1), (x2, w2) = grads
        assert torch.equal(x1, x2)
        assert (w1 is None and w2 is None) or torch.equal(w1, w2)


def test_a_tensor_subclass_output_takes_the_public_path():
    calls = []

    class Loud(torch.Tensor):
        def backward(self, gradient=None, *args, **kwargs):
            calls.append(gradient)
            return super().backward(gradient, *args, **kwargs)

    x = torch.randn(3, requires_grad=True)
    out = (x * 2).as_subclass(Loud)
    runner._backward(out, torch.ones(3))
    assert len(calls) == 1 and torch.equal(x.grad, torch.full((3,), 2.0))


@pytest.fixture(scope="module")
def imported_after():
    """One fresh process (an `import torch` is most of its time) for the two tests below: whether a backward
    imported sympy, then whether meta-device ops, after it, imported dynamo."""
    return _run("""
        import sys, torch
        from validator import runner
        x = torch.randn(3, requires_grad=True)
        runner._backward(x * 2, torch.full((3,), 0.5))
        assert x.grad.tolist() == [1.0, 1.0, 1.0]
        sympy_after_backward = "sympy" in sys.modules
        runner.skip_dynamo_disable_shims()
        w = torch.nn.Parameter(torch.empty(4, 3, device="meta"))
        torch.nn.init.normal_(w, 0.0, 0.02)
        torch.nn.init.trunc_normal_(w)
        torch.nn.init.xavier_uniform_(w)
        lin = torch.nn.Linear(3, 2, device="meta")
        x = torch.randn(3, device="meta")
        y = (x * 2 + 1).exp().softmax(-1)
        assert w.device.type == "meta" and y.shape == (3,)
        print(sympy_after_backward, "torch._dynamo" in sys.modules)
    """).split()


def test_a_backward_imports_no_sympy(imported_after):
    """Tensor.backward's first use with a gradient imports sympy (0.3 s), only to check a shape."""
    assert imported_after[0] == "False"


def test_meta_device_ops_in_a_worker_do_not_import_dynamo(imported_after):
    """An init on the meta device imported dynamo (about a second, in every worker that ran a meta
    check). Those kernels still import sympy for their dtype rules; that is torch's own need."""
    assert imported_after[1] == "False"


def test_only_a_short_lived_process_freezes_its_heap_once_warm():
    code = """
        import gc
        from validator import lifetime
        from validator.worker import client
        lifetime.SHORT_LIVED = {flag}
        client._warm_before_fork()
        print(gc.get_freeze_count() > 0)
    """
    assert _run(code.format(flag=True)) == "True"
    assert _run(code.format(flag=False)) == "False"


def test_a_scan_is_parsed_once_and_its_findings_cannot_be_changed_through_a_caller():
    source = "import torch\nimport threading\nx = torch.nn.functional.embedding\n"
    integrity._scanned.cache_clear()
    first = integrity.scan_source(source, ["torch.nn.functional.embedding"])
    first.clear()  # a caller's list is its own
    second = integrity.scan_source(source, ["torch.nn.functional.embedding"])
    assert integrity._scanned.cache_info().hits == 1
    assert {f.what for f in second} == {"torch.nn.functional.embedding", "threads"}
    other = integrity.scan_source(source, [])  # other bans: scanned again, with its own findings
    assert {f.what for f in other} == {"threads"}
    edited = integrity.scan_source(source.replace("import threading\n", ""), ["torch.nn.functional.embedding"])
    assert {f.what for f in edited} == {"torch.nn.functional.embedding"}
    # the cache keeps plain data, not the tree (a batch grader lives long and a file may be 1 MiB)
    cached = integrity._scanned("layers.py", source, ("torch.nn.functional.embedding",), frozenset())
    assert cached[1] == ((0, "", ("torch",)), (0, "", ("threading",)))
    assert integrity._scanned.cache_info().maxsize <= 16


def test_replacing_torch_engine_entry_later_does_not_reach_the_runner(monkeypatch):
    """Student code runs after the runner is imported; a replaced engine entry (to forge gradients) is not
    what the runner calls."""
    def forged(tensors, grads, *args, **kwargs):
        raise AssertionError("the runner called the student's replacement")

    monkeypatch.setattr(torch.autograd.graph, "_engine_run_backward", forged)
    x = torch.randn(3, requires_grad=True)
    runner._backward(x * 3, torch.ones(3))
    assert torch.equal(x.grad, torch.full((3,), 3.0))


@pytest.mark.thorough
def test_the_watch_grader_warms_meta_kernels_for_the_workers_it_forks_without_dynamo():
    """`submit-build --watch` forks a worker per regrade: the sympy a meta-device check imports (a third of an
    `import torch`) is imported once, in the grader, by torch's own operation, and dynamo stays out."""
    seen = _run("""
        import sys
        from validator.worker import client
        client.warm_for_regrades()
        print("sympy" in sys.modules, "torch._dynamo" in sys.modules)
    """)
    assert seen == "True False"



@pytest.mark.thorough
def test_a_batch_template_hands_its_workers_warm_meta_kernels(tmp_path):
    """A batch slot forks a worker per submission from its template: the sympy a meta-device check imports
    (about 0.7 s) is imported once, in the template, so no submission's worker pays it again."""
    from validator import sandbox
    from validator.worker.client import SandboxedWorker, Template

    student = tmp_path / "layers.py"
    student.write_text("import sys\nif 'sympy' in sys.modules:\n    SYMPY_WAS_THERE = True\n")
    template = Template()
    box = sandbox.plan(sandbox.Limits(), hide=[], files={"layers.py": str(student)}, uid=None, isolate=False)
    worker = SandboxedWorker(student, template=template, sandbox=box)
    try:
        reply = worker.load()
    finally:
        worker.close()
        template.close()
    assert reply.get("ok"), reply
    assert "SYMPY_WAS_THERE" in str(reply), reply


def test_only_a_short_lived_process_collects_its_young_objects_less_often():
    code = """
        import gc
        from validator import lifetime
        lifetime.SHORT_LIVED = {flag}
        before = gc.get_threshold()
        lifetime.collect_less_often()
        print(before[0], gc.get_threshold()[0], before[1:] == gc.get_threshold()[1:])
    """
    assert _run(code.format(flag=True)).split()[1:] == ["10000", "True"]
    default, kept, _ = _run(code.format(flag=False)).split()
    assert kept == default  # CPython's own threshold, which a test session keeps
    # what the CLI, a batch slot and where_time_goes.py call at their start
    assert _run("""
        import gc
        from validator import lifetime
        lifetime.become_short_lived()
        print(lifetime.SHORT_LIVED, gc.get_threshold()[0])
    """) == "True 10000"


def test_a_process_that_keeps_freed_memory_reuses_its_pages():
    # A 16 MiB buffer, freed and asked for again: by default glibc maps it afresh and every page faults again
    # (zeroed by the kernel); kept, the second buffer reuses the first one's pages.
    code = """
        import resource
        from validator import lifetime
        kept = {keep} and lifetime.keep_freed_memory()
        def faults(size):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            block = bytearray(size)
            block[::4096] = b"x" * len(block[::4096])
            del block
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        faults(16 << 20)
        print(kept, faults(16 << 20))
    """
    kept, again = _run(code.format(keep=True)).split()
    if kept != "True":
        pytest.skip("no glibc mallopt here")
    assert int(again) < 256, again
    default, again = _run(code.format(keep=False)).split()
    assert int(again) > 2048, again  # what the setting saves: the test would pass without it otherwise
