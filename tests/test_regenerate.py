"""`validator regenerate`: the stub, the pages, the answers template, the fixtures and the self-check.

Most tests run on a one-challenge project built in a temporary folder (a
reference with markers, a spec, a key), so they prove the tool, not the
current state of the catalogue; the last ones check the real catalogue.
"""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from validator.instructor import stubgen
from validator.instructor.fixtures import RecordingReference
from validator.reference_side import FixtureFile, FrozenReference, call_key, decode, encode, fixture_path
from validator.instructor.regenerate import plan, regenerate
from validator.spec import load_catalogue

ROOT = Path(__file__).resolve().parents[1]

MINI_REFERENCE = textwrap.dedent('''\
    """Instructor reference of the mini catalogue (the module docstring is not handed out)."""

    import torch
    from jaxtyping import Float
    from torch import Tensor

    SECRET_TABLE = None


    def scaled(x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:
        """Return ``3 * x + 1``; an integer tensor raises TypeError."""
        # BEGIN SOLUTION
        if not x.dtype.is_floating_point:
            raise TypeError(f"scaled takes a float tensor, got {x.dtype} values")
        return torch.add(torch.mul(x, 3.0), 1.0)
        # END SOLUTION


    class Shift(torch.nn.Module):
        """Adds a learned vector ``bias`` of shape ``(dim,)``."""

        def __init__(self, dim: int) -> None:
            """Create ``bias`` (zeros)."""
            super().__init__()
            # BEGIN SOLUTION
            self.bias = torch.nn.Parameter(torch.zeros(dim))
            # END SOLUTION

        def forward(self, x: Float[Tensor, "... dim"]) -> Float[Tensor, "... dim"]:
            """Return ``x + bias``."""
            # BEGIN SOLUTION
            return x + self.bias * 1.0
            # END SOLUTION
    ''')

MINI_SPEC = textwrap.dedent('''\
    id: scaling
    title: Scaling
    summary: Multiply by three and add one.
    contract: |
      `scaled(x)` returns `3 * x + 1` for a float tensor of any shape.
    background: |
      An affine map is the smallest layer there is.
    hints:
      - "Plain arithmetic broadcasts."
    entries:
      scaled:
        kind: function
        call: [x]
    inputs:
      x: {type: float, shape: ["..."], dtype: float64}
    checks:
      - id: output_shape
        kind: shape
        test: shape
        points: 1
        title: "the output has the shape of x | always"
      - id: values
        kind: values
        test: values
        points: 2
        title: "the output is 3x + 1"
    questions:
      - id: factor
        type: numeric
        prompt: By what factor is x multiplied?
        tolerance: {abs: 0.01}
        points: 1
      - id: kind
        type: choice
        prompt: What kind of map is this?
        choices: {a: linear, b: affine}
        points: 1
    ''')

MINI_SHIFT_SPEC = textwrap.dedent('''\
    id: shifting
    title: Shifting
    summary: Add a learned bias.
    entries:
      Shift:
        kind: module
        init: [dim]
        call: [x]
        parameters:
          bias: [dim]
    dims:
      dim: [1, 4]
    inputs:
      x: {type: float, shape: ["...", dim]}
    checks:
      - id: values
        kind: values
        test: values
        points: 1
        title: "x + bias"
    ''')

MINI_KEY = {"scaling": {"factor": {"answer": 3, "explanation": "The multiplier applied to every element is "
                                                                "three, then one is added."},
                        "kind": {"answer": "b", "explanation": "An added constant makes it affine, not linear."}}}

CORRECT = "import torch\n\ndef scaled(x):\n    return x * 3 + 1\n\n" \
          "class Shift(torch.nn.Module):\n    def __init__(self, dim):\n        super().__init__()\n" \
          "        self.bias = torch.nn.Parameter(torch.zeros(dim))\n\n    def forward(self, x):\n" \
          "        return x + self.bias\n"
BROKEN = CORRECT.replace("return x * 3 + 1", "return x * 3 + (x.numel() > 3)")


def make_project(root: Path, *, shift: bool = True) -> dict[str, Path]:
    """A one-or-two-challenge instructor project: reference, key, specs (no generated files yet)."""
    dirs = {"reference": root / "reference", "challenges": root / "challenges", "student": root / "student"}
    for d in dirs.values():
        d.mkdir(parents=True, exist_ok=True)
    (dirs["reference"] / "layers.py").write_text(MINI_REFERENCE)
    (dirs["reference"] / "answer_key.yaml").write_text(yaml.safe_dump(MINI_KEY))
    (dirs["challenges"] / "scaling.yaml").write_text(MINI_SPEC)
    (dirs["challenges"] / "shifting.yaml").write_text(MINI_SHIFT_SPEC)
    return dirs


def run_regenerate(dirs: dict[str, Path], **kwargs) -> tuple[int, str]:
    out = io.StringIO()
    code = regenerate(challenges_dir=dirs["challenges"], reference_dir=dirs["reference"],
                      student_dir=dirs["student"], out=out, **kwargs)
    return code, out.getvalue()


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> dict[str, Path]:
    """The mini project after one `regenerate` (recorded fixtures, passing self-check)."""
    dirs = make_project(tmp_path_factory.mktemp("mini"))
    code, text = run_regenerate(dirs)
    assert code == 0, text
    dirs["log"] = text
    return dirs


# -- the stub --------------------------------------------------------------------------
def test_stub_keeps_everything_but_the_solution():
    catalogue = load_catalogue_from_text({"scaling": MINI_SPEC, "shifting": MINI_SHIFT_SPEC})
    stub = stubgen.make_stub(MINI_REFERENCE, catalogue)
    assert "BEGIN SOLUTION" not in stub and "END SOLUTION" not in stub
    assert "torch.mul(x, 3.0)" not in stub and "torch.zeros(dim)" not in stub
    assert 'def scaled(x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:' in stub
    assert '"""Return ``3 * x + 1``; an integer tensor raises TypeError."""' in stub
    assert '\n    raise NotImplementedError("scaled: see challenges/scaling.md")\n' in stub
    assert '\n        raise NotImplementedError("Shift.__init__: see challenges/shifting.md")\n' in stub
    assert "        super().__init__()\n" in stub  # code outside regions is kept
    assert "Instructor reference" not in stub and "Your implementations" in stub
    assert "SECRET_TABLE = None" in stub  # module code outside regions is handed out as is
    compile(stub, "layers.py", "exec")


def load_catalogue_from_text(specs: dict[str, str]):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        for cid, text in specs.items():
            (Path(d) / f"{cid}.yaml").write_text(text)
        return load_catalogue(d)


@pytest.mark.parametrize("edit,line,needle", [
    (lambda s: s.replace("        return x + self.bias * 1.0\n        # END SOLUTION\n",
                         "        return x + self.bias * 1.0\n"), 31, "never closed"),
    (lambda s: s.replace("    return torch.add", "    # BEGIN SOLUTION\n    return torch.add", 1), 15, "do not nest"),
    (lambda s: s.replace("SECRET_TABLE = None", "# END SOLUTION"), 7, "without a matching"),
    (lambda s: s.replace("        # BEGIN SOLUTION\n        return x + self.bias",
                         "        # BEGIN SOLUTION\n        # END SOLUTION\n        return x + self.bias"), 31,
     "empty solution region"),
])
def test_marker_mistakes_name_the_line(edit, line, needle):
    catalogue = load_catalogue_from_text({"scaling": MINI_SPEC, "shifting": MINI_SHIFT_SPEC})
    with pytest.raises(stubgen.StubError) as info:
        stubgen.make_stub(edit(MINI_REFERENCE), catalogue)
    assert f"reference/layers.py:{line}:" in str(info.value) and needle in str(info.value), str(info.value)


def test_a_region_in_a_name_no_spec_lists_is_an_error():
    catalogue = load_catalogue_from_text({"scaling": MINI_SPEC})
    with pytest.raises(stubgen.StubError) as info:
        stubgen.make_stub(MINI_REFERENCE, catalogue)
    assert "no challenge lists `Shift`" in str(info.value) and ":25:" in str(info.value)


def test_marker_text_inside_a_string_is_not_a_marker():
    source = MINI_REFERENCE.replace('"""Return ``3 * x + 1``', '"""Not a marker: # BEGIN SOLUTION. ``3 * x + 1``')
    assert [(r.begin, r.end, r.owner) for r in stubgen.find_regions(source)] == [
        (12, 16, "scaled"), (25, 27, "Shift.__init__"), (31, 33, "Shift.forward")]


# -- pages and the answers template --------------------------------------------------------
def test_page_is_written_from_the_spec(mini):
    page = (mini["challenges"] / "scaling.md").read_text()
    assert page.startswith("<!-- Generated by `validator regenerate`")
    for needle in ["# Scaling", "## Objective", "## Background", "## Contract", "`3 * x + 1`",
                   "| `output_shape` | the output has the shape of x \\| always | 1 |", "| `values` |",
                   "By what factor is x multiplied?", "`b`: affine", "## Hints", "Plain arithmetic broadcasts.",
                   "validator submit-build --challenge scaling", 'def scaled(x: Float[Tensor, "..."])',
                   "worth 5 points: 3 from 2 checks on your code and 2 from 2 questions"]:
        assert needle in page, needle
    assert "torch.mul" not in page and "affine, not linear" not in page  # no solution, no key


def test_answers_template_lists_every_question_unanswered(mini):
    text = (mini["student"] / "answers.yaml").read_text()
    assert yaml.safe_load(text) == {"scaling": {"factor": None, "kind": None}}
    assert "# By what factor is x multiplied?" in text and "#   b) affine" in text


# -- fixtures ------------------------------------------------------------------------------
def test_call_keys_are_stable_across_processes():
    call = {"entry": "f", "inputs": [{"value": torch.arange(6.0).reshape(2, 3), "requires_grad": True}],
            "init_kwargs": {"dtype": torch.float64, "device": "meta"}, "seed": 3, "want": ["output"],
            "state": {"w": torch.ones(2, dtype=torch.bfloat16)}, "grad_output": None}
    here = call_key(call)
    script = ("import torch; from validator.reference_side import call_key; print(call_key({'grad_output': None, "
              "'state': {'w': torch.ones(2, dtype=torch.bfloat16)}, 'want': ['output'], 'seed': 3, "
              "'init_kwargs': {'device': 'meta', 'dtype': torch.float64}, 'entry': 'f', "
              "'inputs': [{'requires_grad': True, 'value': torch.arange(6.0).reshape(2, 3)}]}))")
    there = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=True)
    assert there.stdout.strip() == here
    assert call_key(dict(call, seed=4)) != here
    assert call_key(dict(call, inputs=[{"value": torch.arange(6.0).reshape(3, 2), "requires_grad": True}])) != here


def test_call_keys_tell_apart_what_the_worker_would_be_sent_differently():
    """Equal calls, equal keys; a call that would run differently gets another key, however it is written."""
    t = torch.arange(6.0).reshape(2, 3)
    base = {"entry": "f", "inputs": [{"value": t}], "seed": 1}
    key = call_key(base)
    assert call_key({"seed": 1, "inputs": [{"value": t.clone()}], "entry": "f"}) == key  # order, a copy
    assert call_key(dict(base, inputs=[{"value": t.T.contiguous().T}])) == key  # a strided view: the same values
    assert call_key(dict(base, _dims={"n": 2})) == key  # the grader's own notes are not the call
    different = [
        dict(base, inputs=[{"value": ["float32", [2, 3], "cpu"]}]),  # a list that reads like the tensor's description
        dict(base, inputs=[{"value": t.to(torch.float64)}]), dict(base, inputs=[{"value": t.reshape(3, 2)}]),
        dict(base, inputs=[{"value": t + 1}]), dict(base, inputs=[{"value": torch.empty(0, 3)}]),
        dict(base, seed=True), dict(base, seed=1.0), dict(base, seed="1"), dict(base, seed=None),
        dict(base, dtype=torch.float64), dict(base, dtype="float64"),
        dict(base, x=0.0), dict(base, x=-0.0), dict(base, x=float("nan")), dict(base, x=float("inf")),
        dict(base, opts={1: "a", "b": 2}),  # keys JSON cannot sort: walked, in a domain of its own
        dict(base, opts={"1": "a", "b": 2}),
    ]
    keys = [call_key(c) for c in different]
    assert key not in keys and len(set(keys)) == len(keys)
    assert call_key(dict(base, opts={1: "a", "b": 2})) == keys[-2]  # and stable


def test_fixture_encoding_roundtrips_without_pickle():
    data = {"results": {"k": {"ok": True, "output": torch.randn(2, 3, dtype=torch.float64),
                              "half": torch.ones(2, dtype=torch.bfloat16), "empty": torch.zeros(0, 4),
                              "meta": torch.empty(2, device="meta"), "nan": float("nan"), "none": None,
                              "exception": {"type": "IndexError", "mro": ["IndexError"], "message": "m"}}}}
    back = decode(encode(data))["results"]["k"]
    assert torch.equal(back["output"], data["results"]["k"]["output"])
    assert back["half"].dtype == torch.bfloat16 and back["empty"].shape == (0, 4)
    assert back["meta"].device.type == "meta" and back["none"] is None and back["nan"] != back["nan"]
    assert encode(data) == encode(data)  # deterministic bytes: regenerate stays idempotent


def test_a_miss_rejects_inside_a_search_and_defers_outside():
    from hypothesis import given, settings, strategies as st

    from validator.context import ReferenceUnavailable

    recorder = RecordingReference({})
    recorder.record({"x": 1}, {"ok": True, "output": torch.ones(1), "seconds": 0.1})
    frozen = FrozenReference({"c": FixtureFile("c", "f", [1], ["quick"], [], {}, recorder.results)})
    assert "seconds" not in frozen.call("c", {"x": 1}) and frozen.hits == 1
    with pytest.raises(ReferenceUnavailable, match="deferred to official grading"):
        frozen.call("c", {"x": 2})
    seen = []

    @settings(max_examples=20, database=None)
    @given(st.integers(1, 3))
    def search(x):
        frozen.call("c", {"x": x})
        seen.append(x)

    search()
    assert set(seen) == {1}


def test_fixtures_are_small_and_hold_no_reference_source(mini):
    path = fixture_path(mini["challenges"], "scaling")
    stored = FixtureFile.read(path)
    assert stored.seeds and set(stored.profiles) >= {"quick", "default"} and stored.results
    assert path.stat().st_size < 200_000
    raw = __import__("lzma").decompress(path.read_bytes())
    assert b"scaled takes a float tensor" not in raw and b"layers.py" not in raw


# -- the command -----------------------------------------------------------------------------
def test_regenerate_writes_everything_and_self_checks(mini):
    log = mini["log"]
    assert "wrote" in log and "recorded" in log and "self-check scaling: ok" in log, log
    for path in [mini["student"] / "layers.py", mini["student"] / "answers.yaml", mini["challenges"] / "scaling.md",
                 fixture_path(mini["challenges"], "scaling"), fixture_path(mini["challenges"], "shifting")]:
        assert path.exists(), path


def test_second_run_changes_nothing_and_check_passes(mini):
    before = {p: p.read_bytes() for p in mini["student"].parent.rglob("*") if p.is_file()}
    code, text = run_regenerate(mini, self_check=False)
    assert code == 0 and "up to date" in text and "wrote" not in text and "recorded" not in text, text
    assert {p: p.read_bytes() for p in mini["student"].parent.rglob("*") if p.is_file()} == before
    code, text = run_regenerate(mini, check=True)
    assert code == 0, text


def test_check_names_stale_files_and_writes_nothing(tmp_path):
    dirs = make_project(tmp_path)
    code, text = run_regenerate(dirs, check=True, self_check=False)
    assert code == 1
    assert "student/layers.py is stale" in text and "scaling.md is stale" in text
    assert "fixtures/scaling.frozen is stale (missing)" in text
    assert not (dirs["student"] / "layers.py").exists()


def test_cases_drawn_by_other_code_make_the_fixture_stale(mini, tmp_path, monkeypatch):
    """A grader change that moves no reference result (a comment in a check) still re-records the cases."""
    import shutil

    from validator import case_store

    shutil.copytree(mini["student"].parent, tmp_path, dirs_exist_ok=True)
    dirs = {k: tmp_path / k for k in ("reference", "challenges", "student")}
    assert case_store.read(case_store.cases_path(dirs["challenges"], "scaling"), "default-11")
    monkeypatch.setattr(case_store, "stamp", lambda: {**case_store.read_stamp(
        case_store.cases_path(dirs["challenges"], "scaling")), "code": "changed"})
    code, text = run_regenerate(dirs, check=True, self_check=False)
    assert code == 1 and "fixtures/scaling.frozen is stale (its recorded cases (scaling.cases)" in text, text
    code, text = run_regenerate(dirs, self_check=False)
    assert code == 0 and "fixtures/scaling.frozen (its recorded cases" in text, text
    assert case_store.read_stamp(case_store.cases_path(dirs["challenges"], "scaling"))["code"] == "changed"


def test_prose_changes_restale_the_page_and_graded_changes_the_fixture(mini, tmp_path):
    import shutil

    shutil.copytree(mini["student"].parent, tmp_path, dirs_exist_ok=True)
    spec = tmp_path / "challenges" / "scaling.yaml"

    def stale() -> tuple[list[str], list[str]]:
        todo = plan(load_catalogue(tmp_path / "challenges"), reference_file=tmp_path / "reference" / "layers.py",
                    challenges_dir=tmp_path / "challenges", student_dir=tmp_path / "student")
        return [p.name for p, t in todo.texts.items() if p.read_text() != t], list(todo.stale_fixtures)

    assert stale() == ([], [])
    spec.write_text(spec.read_text().replace("the output is 3x + 1", "the output equals 3x + 1") + "# a comment\n")
    assert stale() == (["scaling.md"], [])  # prose: the page changes, the recorded cases do not
    spec.write_text(spec.read_text().replace("x: {type: float, shape: [\"...\"], dtype: float64}",
                                             "x: {type: float, shape: [\"...\"], dtype: float32}"))
    assert stale() == (["scaling.md"], ["scaling"])
    reference = tmp_path / "reference" / "layers.py"
    spec.write_text((mini["challenges"] / "scaling.yaml").read_text())
    reference.write_text(reference.read_text().replace("    return torch.add(", "    # a comment\n    return torch.add("))
    assert stale() == ([], [])  # a comment in the reference changes nothing
    reference.write_text(reference.read_text().replace("torch.mul(x, 3.0)", "torch.mul(3.0, x)"))
    assert stale() == ([], ["scaling"])  # only the challenge whose reference entry changed
    reference.write_text(reference.read_text() + "\n\nclass Unrelated(torch.nn.Module):\n    pass\n")
    assert stale()[1] == ["scaling"]  # a class no spec uses restales nothing more


NEG_REFERENCE = textwrap.dedent('''\


    def negated(x: Float[Tensor, "..."]) -> Float[Tensor, "..."]:
        """Return ``-x``."""
        # BEGIN SOLUTION
        return torch.neg(x)
        # END SOLUTION
    ''')
NEG_SPEC = MINI_SHIFT_SPEC.replace("id: shifting", "id: negating").replace("title: Shifting", "title: Negating") \
    .replace("summary: Add a learned bias.", "summary: Negate.").split("entries:")[0] + textwrap.dedent('''\
    entries:
      negated:
        kind: function
        call: [x]
    inputs:
      x: {type: float, shape: ["..."], dtype: float64}
    checks:
      - id: values
        kind: values
        test: values
        points: 1
        title: "-x"
    ''')


def test_adding_a_challenge_records_only_its_fixture(mini, tmp_path):
    """The authoring loop: a new reference entry and spec re-record one fixture, not the catalogue's."""
    import shutil

    shutil.copytree(mini["student"].parent, tmp_path, dirs_exist_ok=True)
    dirs = {k: tmp_path / k for k in ("reference", "challenges", "student")}
    fixtures = dirs["challenges"] / "fixtures"
    before = {p.name: p.read_bytes() for p in fixtures.glob("*.frozen")}
    (dirs["reference"] / "layers.py").write_text((dirs["reference"] / "layers.py").read_text() + NEG_REFERENCE)
    (dirs["challenges"] / "negating.yaml").write_text(NEG_SPEC)
    code, text = run_regenerate(dirs, challenges=["negating"])
    assert code == 0, text
    after = {p.name: p.read_bytes() for p in fixtures.glob("*.frozen")}
    changed = sorted(n for n in after if before.get(n) != after[n])
    assert changed == ["negating.frozen"], text
    assert "checked negating live: ok" in text
    code, text = run_regenerate(dirs, check=True, self_check=False)
    assert code == 0, text  # the other challenges' fixtures are still fresh


def test_a_wrong_new_reference_fails_fast_and_records_nothing(mini, tmp_path):
    import shutil

    shutil.copytree(mini["student"].parent, tmp_path, dirs_exist_ok=True)
    dirs = {k: tmp_path / k for k in ("reference", "challenges", "student")}
    (dirs["reference"] / "layers.py").write_text((dirs["reference"] / "layers.py").read_text()
                                                 + NEG_REFERENCE.replace("return torch.neg(x)", "assert x.dim() < 2, 'a reference bug'\n    return torch.neg(x)"))
    (dirs["challenges"] / "negating.yaml").write_text(NEG_SPEC)
    code, text = run_regenerate(dirs, challenges=["negating"])
    assert code == 1 and "checked negating live: FAILED" in text, text
    assert "nothing was recorded" in text and "values error" in text, text
    assert not (dirs["challenges"] / "fixtures" / "negating.frozen").exists()
    assert "self-check" not in text  # stopped before recording and self-checking


def test_spec_mistake_is_reported_with_file_and_line(tmp_path):
    dirs = make_project(tmp_path)
    spec = dirs["challenges"] / "scaling.yaml"
    spec.write_text(spec.read_text().replace("points: 2\n    title: \"the output is 3x + 1\"",
                                             "points: -2\n    title: \"the output is 3x + 1\""))
    code, text = run_regenerate(dirs, check=True)
    assert code == 1 and "spec error" in text and "scaling.yaml:25:" in text and "points" in text, text


def test_self_check_catches_a_stub_that_scores_and_a_wrong_key(tmp_path):
    dirs = make_project(tmp_path)
    spec = dirs["challenges"] / "scaling.yaml"
    spec.write_text(spec.read_text().replace("questions:\n", textwrap.dedent("""\
          - id: no_library
            kind: constraint
            test: forbidden_source
            apis: [torch.nn.Embedding]
            points: 1
            title: no library
        questions:
        """), 1))
    key = dict(MINI_KEY, scaling=dict(MINI_KEY["scaling"], kind={"answer": "z"}))
    (dirs["reference"] / "answer_key.yaml").write_text(yaml.safe_dump(key))
    code, text = run_regenerate(dirs, challenges=["scaling"])
    assert code == 1  # a wrong key stops regenerate before anything is recorded
    assert "scaling.kind answer 'z' is not one of the choices" in text and "nothing was recorded" in text, text
    (dirs["reference"] / "answer_key.yaml").write_text(yaml.safe_dump(MINI_KEY))
    code, text = run_regenerate(dirs, challenges=["scaling"])
    assert code == 1
    assert "the stub scores points (a check passes without any solution): no_library (1)" in text, text


# -- the real catalogue ----------------------------------------------------------------------
def test_catalogue_stub_pages_and_template_are_fresh():
    """What `validator regenerate --check` verifies first: the committed outputs match the generator."""
    catalogue = load_catalogue(ROOT / "challenges")
    todo = plan(catalogue, reference_file=ROOT / "reference" / "layers.py", challenges_dir=ROOT / "challenges",
                student_dir=ROOT / "student")
    stale = [str(p.relative_to(ROOT)) for p, t in todo.texts.items()
             if not p.exists() or p.read_text(encoding="utf-8") != t]
    assert not stale, f"stale generated files, run `validator regenerate`: {stale}"


@pytest.mark.slow
def test_regenerate_check_passes_on_the_catalogue():
    """The full CI gate: fresh fixtures, reference full marks with the key, stub zero, replay full marks."""
    from validator.cli import main

    assert main(["regenerate", "--check"]) == 0
