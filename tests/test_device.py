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
