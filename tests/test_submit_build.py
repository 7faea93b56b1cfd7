"""submit-build end to end: exit statuses, the JSON contract, and student files that go wrong."""

from __future__ import annotations

import io
import json
import textwrap
from pathlib import Path

import pytest

from validator.cli import main as cli_main
from validator.results import KINDS, STATUSES
from validator.submit import make_console

ROOT = Path(__file__).resolve().parents[1]

GOOD = textwrap.dedent("""\
    import torch
    from torch import nn

    class Embedding(nn.Module):
        def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
            nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

        def forward(self, token_ids):
            if token_ids.numel() and ((token_ids < 0) | (token_ids >= self.weight.shape[0])).any():
                raise IndexError("token id out of range")
            return self.weight[token_ids]
    """)


def run(tmp_path: Path, source: str, *extra: str, name: str = "layers.py") -> tuple[int, dict | None, str]:
    student = tmp_path / name
    student.write_text(source)
    out = tmp_path / "report.json"
    buf = io.StringIO()
    import validator.submit as submit
    original = submit.make_console
    submit.make_console = lambda file=None: make_console(buf)
    try:
        code = cli_main(["submit-build", "--challenge", "token_embedding", "--student", str(student),
                         "--json", str(out), "--no-input", "--profile", "quick", "--seed", "7", *extra])
    finally:
        submit.make_console = original
    report = json.loads(out.read_text()) if out.exists() else None
    return code, report, buf.getvalue()


def check_schema(report: dict) -> None:
    assert set(report) >= {"score", "max_score", "challenges"}
    for ch in report["challenges"]:
        assert set(ch) >= {"id", "score", "max_score", "checks"}
        for c in ch["checks"]:
            assert set(c) >= {"id", "kind", "status", "score", "max_score", "message"}
            assert c["kind"] in KINDS and c["status"] in STATUSES
    assert report["score"] == pytest.approx(sum(c["score"] for c in report["challenges"]))


def code_checks(report):
    return [c for c in report["challenges"][0]["checks"] if c["kind"] != "question"]


def test_correct_layer_passes_every_code_check(tmp_path):
    code, report, text = run(tmp_path, GOOD)
    check_schema(report)
    bad = [c for c in code_checks(report) if c["status"] not in ("passed",)]
    assert not bad, bad
    assert code == 1  # the questions are unanswered in this test
    assert "seed 7" in text


def test_full_marks_with_answers_exit_zero(tmp_path):
    import yaml
    key = yaml.safe_load((ROOT / "reference" / "answer_key.yaml").read_text())["token_embedding"]
    answers = tmp_path / "answers.yaml"
    answers.write_text(yaml.safe_dump({"token_embedding": {q: v["answer"] for q, v in key.items()}}))
    code, report, _ = run(tmp_path, GOOD, "--answers", str(answers))
    assert code == 0 and report["score"] == report["max_score"] > 0


def test_shipped_stub_scores_zero_with_readable_failures(tmp_path):
    code, report, text = run(tmp_path, (ROOT / "student" / "layers.py").read_text())
    assert code == 1 and report["score"] == 0
    assert "NotImplementedError" in text and "reproduce:" in text


@pytest.mark.parametrize("source,needle", [
    ("def broken(:\n    pass\n", "SyntaxError"),
    ("import torch_does_not_exist\n", "ModuleNotFoundError"),
    ("import torch\n", "defines no Embedding"),
    ("raise SystemExit(3)\n", "SystemExit"),
])
def test_unusable_student_file_gives_one_clear_problem(tmp_path, source, needle):
    code, report, text = run(tmp_path, source)
    assert code == 1
    ch = report["challenges"][0]
    assert needle in ch["problem"]
    assert all(c["status"] == "error" for c in code_checks(report))
    assert "Traceback" not in text


def test_wrong_signature_costs_only_the_signature_check(tmp_path):
    source = GOOD.replace("def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None)",
                          "def __init__(self, vocab, dim, device=None, dtype=None)") \
                 .replace("(num_embeddings, embedding_dim, device", "(vocab, dim, device")
    code, report, _ = run(tmp_path, source)
    failing = {c["id"] for c in code_checks(report) if c["status"] != "passed"}
    assert failing == {"signature"}


def test_exit_and_hang_in_forward_are_check_failures_not_grader_crashes(tmp_path):
    source = GOOD.replace('        return self.weight[token_ids]',
                          '        if token_ids.dtype == torch.int32:\n'
                          '            import os; os._exit(7)\n'
                          '        if token_ids.numel() == 0:\n'
                          '            while True: pass\n'
                          '        return self.weight[token_ids]')
    assert "os._exit" in source
    code, report, text = run(tmp_path, source, "--check", "int32_ids", "--check", "zero_size_ids",
                             "--check", "matches_reference", "--timeout", "3")
    by_id = {c["id"]: c for c in report["challenges"][0]["checks"]}
    assert by_id["int32_ids"]["status"] == "error" and "os._exit" in by_id["int32_ids"]["message"]
    assert by_id["zero_size_ids"]["status"] == "error" and "no answer after 3 s" in by_id["zero_size_ids"]["message"]
    # the hang on empty input is the edge-shape check's alone: the general checks draw ordinary shapes
    assert by_id["matches_reference"]["status"] == "passed"
    # A hang everywhere: one time-out, one short re-probe, then the entry is not called again.
    forever = GOOD.replace('        return self.weight[token_ids]', '        while True: pass')
    code, report, text = run(tmp_path, forever, "--check", "output_shape", "--check", "matches_reference",
                             "--check", "int32_ids", "--timeout", "3")
    by_id = {c["id"]: c for c in report["challenges"][0]["checks"]}
    assert "no answer after 3 s" in by_id["output_shape"]["message"]
    assert "Embedding already timed out in check token_embedding/output_shape, so later calls to it get" \
        in by_id["matches_reference"]["message"]
    assert by_id["int32_ids"]["message"].startswith(
        "not run: Embedding already timed out in check token_embedding/output_shape; see there")
    assert code == 1


def test_malformed_spec_exits_2_with_file_and_line(tmp_path, capsys):
    specs = tmp_path / "challenges"
    specs.mkdir()
    (specs / "token_embedding.yaml").write_text((ROOT / "challenges" / "token_embedding.yaml").read_text()
                                                .replace("points: 3", "points: -3", 1))
    student = tmp_path / "layers.py"
    student.write_text(GOOD)
    import os
    os.environ["VALIDATOR_CHALLENGES"] = str(specs)
    try:
        code = cli_main(["submit-build", "--student", str(student), "--no-input"])
    finally:
        del os.environ["VALIDATOR_CHALLENGES"]
    err = capsys.readouterr().err
    assert code == 2 and "token_embedding.yaml:" in err and "points" in err


def test_usage_errors_exit_2(tmp_path, capsys):
    assert cli_main(["submit-build", "--student", str(tmp_path / "missing.py")]) == 2
    assert cli_main(["submit-build", "--bogus"]) == 2
    student = tmp_path / "layers.py"
    student.write_text(GOOD)
    assert cli_main(["submit-build", "--student", str(student), "--challenge", "nope", "--no-input"]) == 2
    assert "unknown challenge nope" in capsys.readouterr().err


def test_student_directory_argument(tmp_path):
    (tmp_path / "sub").mkdir()
    code, report, _ = run(tmp_path / "sub", GOOD, "--check", "parameters")
    assert report["challenges"][0]["checks"][0]["status"] == "passed"


def test_usage_mistakes_are_usage_errors(tmp_path, capsys):
    student = tmp_path / "layers.py"
    student.write_text(GOOD)
    base = ["submit-build", "--student", str(student), "--challenge", "token_embedding", "--no-input"]
    assert cli_main(base + ["--check", "no_such_check"]) == 2
    assert "no_such_check" in capsys.readouterr().err
    assert cli_main(base + ["--answers", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    notes = tmp_path / "notes.txt"
    notes.write_text("not python")
    assert cli_main(["submit-build", "--student", str(notes), "--no-input"]) == 2
    assert "not a Python file" in capsys.readouterr().err


def test_reproduce_lines_replay_this_file_and_profile_and_survive_copy_paste(tmp_path):
    source = GOOD.replace("return self.weight[token_ids]", "return self.weight[token_ids] * 2")
    code, report, text = run(tmp_path, source, "--check", "matches_reference", "--check",
                             "no_library_embedding_source")
    student = str(tmp_path / "layers.py")
    header = next(line for line in text.splitlines() if "reproduce this run:" in line)
    assert f"--student {student}" in header and "--profile quick" in header and "--seed 7" in header
    check = report["challenges"][0]["checks"][0]
    assert check["id"] == "matches_reference" and f"--student {student}" in check["reproduce"]
    assert "--profile quick" in check["reproduce"]
    assert any(line.strip().endswith(check["reproduce"]) for line in text.splitlines())  # one unbroken line
    skip = next(line for line in text.splitlines() if line.startswith("SKIP no_library_embedding_source"))
    assert "not graded until matches_reference passes" in skip  # a SKIP says why


def test_an_init_check_shows_the_exception_the_constructor_raised(tmp_path):
    """Building the layer for the init checks raised: the report shows the student's exception and where,
    not a bare "building the layer failed" (which a grader failure would have read as too)."""
    from helpers import grade_file

    layers = tmp_path / "layers.py"
    layers.write_text(textwrap.dedent('''\
        import torch
        from torch import nn


        class Embedding(nn.Module):
            def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
                super().__init__()
                raise ValueError("no table for you")
        '''))
    (result,) = grade_file(layers, "token_embedding", checks=["init_independent", "init_reproducible"])
    for check in result.checks:
        if check.id in ("init_independent", "init_reproducible"):
            assert check.status == "error", (check.id, check.status, check.message)
            assert "ValueError" in check.message and "no table for you" in check.message, check.message
            assert "layers.py" in check.message, check.message


def test_a_forward_that_raises_on_a_perturbed_weight_is_named_by_the_finite_difference_check(tmp_path):
    """The finite-difference check says which exception the forward raised, and where, on a perturbed weight."""
    from helpers import grade_file

    layers = tmp_path / "layers.py"
    layers.write_text(textwrap.dedent('''\
        import torch
        from torch import nn

        _FIRST = []


        class Embedding(nn.Module):
            def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
                super().__init__()
                self.weight = nn.Parameter(torch.randn(num_embeddings, embedding_dim, device=device, dtype=dtype))

            def forward(self, token_ids):
                w = self.weight.detach()
                if not _FIRST or _FIRST[0].shape != w.shape or _FIRST[0].dtype != w.dtype:
                    _FIRST[:] = [w.clone()]
                elif not torch.equal(w, _FIRST[0]) and torch.allclose(w, _FIRST[0], atol=1e-3):
                    raise ValueError("a nudged weight")
                return self.weight[token_ids]
        '''))
    (result,) = grade_file(layers, "token_embedding", checks=["gradcheck"])
    (check,) = [c for c in result.checks if c.id == "gradcheck"]
    assert check.status == "error", (check.status, check.message)
    assert "slightly perturbed weight" in check.message and "ValueError" in check.message, check.message
    assert "a nudged weight" in check.message and "layers.py" in check.message, check.message


_INDEX_ADD = ROOT / "tests" / "implementations" / "embedding_backward" / "correct" / "index_add.py"
_RETURN = "        return None, grad_weight"


def _gradcheck_with_calls(tmp_path, monkeypatch, source: str):
    """The gradcheck verdict on ``source`` and the sizes of the batches of calls it sent (finite differences)."""
    from helpers import grade_file
    from validator.context import Context

    sizes = []
    many = Context.student_many

    def counted(self, calls, *args, **kwargs):
        sizes.append(len(calls))
        return many(self, calls, *args, **kwargs)

    monkeypatch.setattr(Context, "student_many", counted)
    layers = tmp_path / "layers.py"
    layers.write_text(source)
    (result,) = grade_file(layers, "embedding_backward", checks=["gradcheck"])
    (check,) = [c for c in result.checks if c.id == "gradcheck"]
    return check, sizes


def test_gradcheck_a_right_backward_costs_four_forward_calls_a_case(tmp_path, monkeypatch):
    """Two random directions, two signs: torch.autograd.gradcheck's fast mode, not two calls per element."""
    check, sizes = _gradcheck_with_calls(tmp_path, monkeypatch, _INDEX_ADD.read_text())
    assert check.status == "passed", check.message
    assert sizes and set(sizes) == {4}, sizes


def test_gradcheck_a_projection_that_disagrees_is_decided_element_by_element(tmp_path, monkeypatch):
    """A backward off by 1e-5 (inside the element-wise rtol of 1e-3, far outside the projections' own error):
    the element-wise Jacobian decides, and passes it."""
    source = _INDEX_ADD.read_text()
    assert _RETURN in source
    check, sizes = _gradcheck_with_calls(tmp_path, monkeypatch, source.replace(_RETURN, _RETURN + " * (1 + 1e-5)"))
    assert check.status == "passed", check.message
    assert 4 in sizes and max(sizes) > 4, sizes


def test_gradcheck_a_wrong_backward_is_named_by_its_element(tmp_path, monkeypatch):
    source = _INDEX_ADD.read_text()
    check, sizes = _gradcheck_with_calls(tmp_path, monkeypatch, source.replace(_RETURN, _RETURN + " * 1.01"))
    assert check.status == "failed" and max(sizes) > 4, (check.status, sizes)
    assert "element" in check.message and "analytically" in check.message and "numerically" in check.message


def test_a_folder_whose_adapters_are_not_in_tests_names_where_they_are(tmp_path):
    """A repository that moved CS336's adapters next to its code (src/cs336_basics/adapters.py, seen in a real one) is
    no package the grader reads; the error said only that there is no layers.py."""
    from validator.api import UsageError
    from validator.submit import submit_build

    (tmp_path / "src" / "cs336_basics").mkdir(parents=True)
    (tmp_path / "src" / "cs336_basics" / "adapters.py").write_text("def run_linear(): ...\n")
    with pytest.raises(UsageError) as caught:
        submit_build(student=str(tmp_path), console=make_console(file=io.StringIO()))
    assert "This folder holds src/cs336_basics/adapters.py: the grader reads CS336's tests/adapters.py" \
        in str(caught.value), str(caught.value)
