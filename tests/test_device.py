"""`--device`: the student's layers run on another device, the reference and comparisons stay on the CPU.

CI has no GPU, so these tests drive the same path with device="cpu" and use the meta device to
prove that a result left on the wrong device is reported; on a GPU machine,
VALIDATOR_TEST_DEVICE=cuda runs the whole mutant library there (tests/test_mutants.py).
"""

from __future__ import annotations

import torch
import pytest
from torch import nn

from test_submit_build import GOOD, code_checks, run
from validator.api import UsageError, check_device
from validator.cli import main as cli_main
from validator.runner import execute


def test_device_cpu_grades_like_no_device(tmp_path):
    code, report, text = run(tmp_path, GOOD, "--device", "cpu")
    assert code == 1  # questions unanswered; every code check passes
    assert all(c["status"] == "passed" for c in code_checks(report)), code_checks(report)
    assert "your layers on cpu" in text and "--device cpu" in text


def test_failure_reproduce_command_keeps_the_device(tmp_path):
    doubled = GOOD.replace("return self.weight[token_ids]", "return self.weight[token_ids] * 2")
    _, report, _ = run(tmp_path, doubled, "--device", "cpu")
    failed = [c for c in code_checks(report) if c["status"] == "failed"]
    commands = [c["reproduce"].split("  #")[0] for c in failed]  # a trailing comment says where a line replays
    assert failed and all(command.endswith("--device cpu") for command in commands), commands


@pytest.mark.parametrize("device,needle", [
    ("meta", "meta tensors hold no values"),
    ("not-a-device", "is not a torch device"),
    pytest.param("cuda", "sees no cuda device", marks=pytest.mark.skipif(torch.cuda.is_available(),
                                                                         reason="this machine has CUDA")),
])
def test_unusable_device_is_a_usage_error(tmp_path, capsys, device, needle):
    student = tmp_path / "layers.py"
    student.write_text(GOOD)
    assert cli_main(["submit-build", "--student", str(student), "--device", device, "--no-input"]) == 2
    assert needle in capsys.readouterr().err
    with pytest.raises(UsageError, match=needle):
        check_device(device)


class _Layer(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.weight = nn.Parameter(torch.arange(float(n)))

    def forward(self, x):
        return x * self.weight


class _CpuOutput(_Layer):
    def forward(self, x):
        return torch.zeros(x.shape)  # no device=: always on the CPU


def _call(entry, **extra):
    return {"entry": entry, "kind": "module", "init_args": [3], "inputs": [{"value": torch.ones(3)}],
            "want": ["output", "param_grads"], "grad_output": torch.ones(3), "seed": 0, **extra}


def test_runner_moves_layer_and_inputs_and_brings_results_back():
    plain = execute({"Layer": _Layer}, _call("Layer"))
    moved = execute({"Layer": _Layer}, _call("Layer", device="cpu"))
    assert moved["ok"] and plain["ok"]
    torch.testing.assert_close(moved["output"], plain["output"])
    torch.testing.assert_close(moved["param_grads"]["weight"], plain["param_grads"]["weight"])
    assert not moved["output"].requires_grad


def test_output_left_on_another_device_is_the_students_error():
    result = execute({"Layer": _CpuOutput}, _call("Layer", device="meta", want=["output"], grad_output=None))
    assert not result["ok"] and result["stage"] == "forward"
    assert "on cpu, but the layer and its inputs are on meta" in result["exception"]["message"]
    assert "device=x.device" in result["exception"]["message"]


def test_a_device_side_assert_costs_one_check_not_the_rest(tmp_path):
    """After a CUDA device-side assert the process cannot compute any more: the worker is replaced.

    Simulated on the CPU with the error CUDA raises; the detection reads the error, not the device.
    """
    from validator.worker.client import Worker, WorkerFailure

    student = tmp_path / "layers.py"
    student.write_text(GOOD.replace(
        'raise IndexError("token id out of range")',
        'raise RuntimeError("CUDA error: device-side assert triggered\\nCompile with TORCH_USE_CUDA_DSA")'))
    call = {"entry": "Embedding", "kind": "module", "init_args": [4, 2], "want": ["output"], "seed": 0}
    with Worker(student) as worker:
        first_pid = worker.request({"op": "hello"}, 60)["pid"]
        with pytest.raises(WorkerFailure) as failure:
            worker.request({"op": "execute", "call": {**call, "inputs": [{"value": torch.tensor([9])}]}}, 60)
        assert failure.value.reason == "device"
        assert "check the range yourself and raise IndexError" in str(failure.value)
        fine = worker.request({"op": "execute", "call": {**call, "inputs": [{"value": torch.tensor([1])}]}}, 60)
        assert fine["ok"] and fine["output"].shape == (1, 2)
        assert worker.request({"op": "hello"}, 60)["pid"] != first_pid


def _no_driver_here(monkeypatch):
    """Any question to CUDA's driver in this process fails the test: after one, no forked worker could use CUDA."""
    def asked(*_args, **_kwargs):
        raise AssertionError("the grading process asked the CUDA driver")

    monkeypatch.setattr(torch.cuda, "is_available", asked)
    monkeypatch.setattr(torch.cuda, "device_count", asked)
    if hasattr(torch._C, "_cuda_getDeviceCount"):
        monkeypatch.setattr(torch._C, "_cuda_getDeviceCount", asked)


def test_checking_a_device_asks_a_fresh_interpreter(monkeypatch):
    """The first GPU run found every check erroring: check_device had asked torch.cuda.is_available() in the
    grading process, and each worker forked after it failed with "Cannot re-initialize CUDA in forked
    subprocess". The question now goes to another interpreter."""
    import validator.api as api

    _no_driver_here(monkeypatch)
    api._device_count.cache_clear()
    try:
        check_device("cuda")  # a GPU machine: accepted; the CPU: a usage error. Either way, asked elsewhere
    except UsageError as exc:
        assert "sees no cuda device" in str(exc) or "has no cuda backend" in str(exc)
    finally:
        api._device_count.cache_clear()


def test_cpu_only_seeding_asks_nothing_and_a_device_run_seeds_the_device(monkeypatch):
    from validator import runner

    seeded = []
    _no_driver_here(monkeypatch)
    monkeypatch.setattr(runner, "_DEVICE_SEEDERS", {})
    monkeypatch.setattr(runner, "_CPU_ONLY", [False])
    monkeypatch.setattr(torch.cuda, "manual_seed_all", seeded.append)
    runner.seed_only_the_cpu()
    torch.manual_seed(3)
    assert seeded == []  # switched off without asking whether CUDA is there
    runner.reseed(7)  # the runner's seeding: the CPU generator alone, the stream torch.manual_seed gives
    drawn = torch.rand(5)
    torch.manual_seed(7)
    assert torch.equal(drawn, torch.rand(5))
    monkeypatch.setattr(torch, "default_generator", None)  # what a submission could rebind: not what is seeded
    runner.reseed(7)
    assert torch.equal(drawn, torch.rand(5))
    runner.seed_device_too("cpu")
    torch.manual_seed(4)
    runner.reseed(4)
    assert seeded == []
    runner.seed_device_too("cuda:0")
    torch.manual_seed(5)
    assert seeded == [5]  # dropout on the GPU draws from CUDA's generator: a device run seeds it
    runner.reseed(6)
    assert seeded == [5, 6]  # and so does the runner's seeding, from then on


def test_a_worker_for_a_device_is_never_forked(tmp_path):
    """This process may have started the driver (a notebook that asked torch.cuda.is_available()): a worker
    forked from it could not use the device, so a device run's worker is a fresh interpreter."""
    from validator.worker.client import Worker, _ForkedChild

    student = tmp_path / "layers.py"
    student.write_text(GOOD)
    with Worker(student) as worker:
        forked = worker.request({"op": "hello"}, 60)["pid"]
        assert isinstance(worker.proc, _ForkedChild)
        worker.use_device("cuda")
        assert worker.proc is None  # the forked one is stopped
        fresh = worker.request({"op": "hello"}, 120)["pid"]
        assert fresh != forked and not isinstance(worker.proc, _ForkedChild)
        assert worker.sibling().fresh_interpreter
