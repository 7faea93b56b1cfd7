"""A student's own package graded in place through a [tool.validator] mapping (issue 11, last part).

The fixture tests/packages/cs336_style is a CS336-style package (cs336_basics/model.py,
cs336_basics/nn_utils.py) whose classes, functions, constructor arguments and parameters
are named the student's way. The same code with the contract's names, copied into one
layers.py (:func:`layers_copy`), must get the same verdicts, correct and broken alike.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sys
import tokenize
from contextlib import redirect_stderr
from pathlib import Path

import pytest
import torch

from helpers import catalogue
from validator.api import grade
from validator.checks.common import match_parameters, tied_parameters, unmatched_parameters
from validator.integrity import scan_package
from validator.package import MapError, is_package_root, load_package, top_level_names
from validator.runner import bind_by_position

FIXTURE = Path(__file__).resolve().parent / "packages" / "cs336_style"
MAPPED = ["token_embedding", "embedding_functional", "learned_positional_embedding", "linear", "rms_norm", "swiglu",
          "softmax", "rope", "attention", "multihead_self_attention", "transformer_block"]
# The student's names -> the contract's, for the layers.py copy of the same code.
CONTRACT_NAMES = {"MyEmbedding": "Embedding", "PositionTable": "LearnedPositionalEmbedding",
                  "lookup_rows": "embedding", "ids": "token_ids", "table": "weight", "pe": "weight",
                  "vocab_size": "num_embeddings", "d_model": "embedding_dim", "context_length": "max_seq_len",
                  "dev": "device", "dt": "dtype",
                  # cs336_basics/transformer.py
                  "Dense": "Linear", "RootMeanSquareNorm": "RMSNorm", "GatedFFN": "SwiGLU", "stable_softmax": "softmax",
                  "Rotary": "RotaryPositionalEmbedding", "attention": "scaled_dot_product_attention",
                  "CausalSelfAttention": "MultiHeadSelfAttention", "W": "weight", "gain": "weight",
                  "gate_proj": "w1", "down_proj": "w2", "up_proj": "w3", "wq": "q_proj", "wk": "k_proj",
                  "wv": "v_proj", "wo": "output_proj", "width": "d_model", "axis": "dim", "t": "x", "q": "Q", "k": "K",
                  "v": "V", "n_heads": "num_heads", "rope_theta": "theta", "hidden": "d_ff", "head_dim": "d_k",
                  "d_in": "in_features", "d_out": "out_features", "positions": "token_positions",
                  "Block": "TransformerBlock"}


def copy_package(tmp_path: Path, name: str = "pkg") -> Path:
    dest = tmp_path / name
    shutil.copytree(FIXTURE, dest)
    return dest


def patch(root: Path, rel: str, old: str, new: str) -> None:
    path = root / rel
    text = path.read_text()
    assert old in text, f"{old!r} not in {rel}: the fixture changed"
    path.write_text(text.replace(old, new, 1))


def layers_copy(root: Path, into: Path) -> Path:
    """The package's code in one layers.py, every student name replaced by the contract's.

    Names are replaced token by token, so text inside strings (f-strings included) is left as it is:
    the fixture's f-strings name locals only.
    """
    parts = []
    for rel in ("cs336_basics/nn_utils.py", "cs336_basics/model.py", "cs336_basics/transformer.py"):
        source = (root / rel).read_text().replace("from .nn_utils import lookup_rows\n", "")
        tokens = [(t.type, CONTRACT_NAMES.get(t.string, t.string) if t.type == tokenize.NAME else t.string)
                  for t in tokenize.generate_tokens(io.StringIO(source).readline)]
        parts.append(tokenize.untokenize(tokens))
    into.mkdir(parents=True, exist_ok=True)
    layers = into / "layers.py"
    layers.write_text("\n\n".join(parts))
    return layers


def verdicts(report) -> dict[str, str]:
    return {f"{ch.id}/{c.id}": c.status for ch in report.challenges for c in ch.checks if c.kind != "question"}


def grade_both(root: Path, tmp_path: Path, challenges: list[str], *, seed: int = 3, checks=None):
    package = load_package(root, catalogue())
    in_place = grade(root, challenges=challenges, seed=seed, profile="quick", catalogue=catalogue(),
                     package=package, checks=checks)
    copied = grade(layers_copy(root, tmp_path / "copy"), challenges=challenges, seed=seed, profile="quick",
                   catalogue=catalogue(), checks=checks)
    return in_place, copied


# -- the mapping: read and checked against the catalogue ---------------------------------------------
def test_fixture_mapping_is_read():
    package = load_package(FIXTURE, catalogue())
    assert is_package_root(FIXTURE)
    target = package.target("token_embedding", "Embedding")
    assert (target.label, target.file) == ("cs336_basics.model:MyEmbedding", "cs336_basics/model.py")
    assert package.target("embedding_functional", "embedding").label == "cs336_basics.nn_utils:lookup_rows"
    assert package.parameters["learned_positional_embedding"] == {"LearnedPositionalEmbedding": {"weight": "pe"}}
    assert package.parameters["swiglu"]["SwiGLU"]["w1.weight"] == "gate_proj.W"
    assert sorted(package.mapped_challenges(list(catalogue()))) == sorted(MAPPED)
    assert "tied_lm_head" in package.unmapped and "not mapped" in package.unmapped["tied_lm_head"]["TiedEmbeddingLM"]
    assert set(package.data) == {"cs336_basics/__init__.py", "cs336_basics/model.py", "cs336_basics/nn_utils.py",
                                 "cs336_basics/transformer.py"}


MALFORMED = [
    ('"nosuch.Embedding" = "cs336_basics.model:MyEmbedding"', "unknown challenge 'nosuch'"),
    ('"token_embedding.Embeding" = "cs336_basics.model:MyEmbedding"', "has no entry 'Embeding'"),
    ('"token_embedding" = "cs336_basics.model:MyEmbedding"', 'must be "challenge.Entry"'),
    ('"token_embedding.Embedding" = "cs336_basics.model.MyEmbedding"', 'is not "module:attr"'),
    ('"token_embedding.Embedding" = "cs336_basics.modle:MyEmbedding"', "no module cs336_basics.modle"),
    ('"token_embedding.Embedding" = "cs336_basics.model:YourEmbedding"', "defines no 'YourEmbedding'"),
    ('"token_embedding.Embedding" = 3', 'is not "module:attr"'),
]


@pytest.mark.parametrize("line, said", MALFORMED)
def test_malformed_mapping_names_file_and_key(tmp_path, line, said):
    root = copy_package(tmp_path)
    (root / "pyproject.toml").write_text(f"[tool.validator.map]\n{line}\n")
    with pytest.raises(MapError) as info:
        load_package(root, catalogue())
    message = str(info.value)
    assert said in message and "pyproject.toml" in message and "tool.validator.map" in message


def test_lenient_load_sets_a_bad_line_aside_for_its_own_entry_only(tmp_path):
    """Batch grading loads leniently: a typo in one line costs that entry's challenge, not the submission."""
    root = copy_package(tmp_path)
    text = (root / "pyproject.toml").read_text()
    bad = text.replace('"cs336_basics.model:MyEmbedding"', '"cs336_basics.modle:MyEmbedding"', 1)
    assert bad != text
    bad = bad.replace("\n[tool.validator.map]\n", '\n[tool.validator.map]\n"nosuch.Thing" = "cs336_basics.model:X"\n', 1)
    (root / "pyproject.toml").write_text(bad)
    with pytest.raises(MapError):
        load_package(root, catalogue())
    package = load_package(root, catalogue(), strict=False)
    assert "no module cs336_basics.modle" in package.unmapped["token_embedding"]["Embedding"]
    assert package.target("token_embedding", "Embedding") is None  # never a silent fall-back to another class
    assert package.target("embedding_functional", "embedding").label == "cs336_basics.nn_utils:lookup_rows"
    assert [n for n in package.notes if "unknown challenge 'nosuch'" in n and "set aside" in n]
    report = grade(root, challenges=["token_embedding", "embedding_functional"], seed=1, profile="quick",
                   catalogue=catalogue(), package=package, checks=["signature"])
    broken, fine = report.challenges
    assert "no module cs336_basics.modle" in broken.problem and broken.checks[0].status != "passed"
    assert fine.problem is None and fine.checks[0].status == "passed"
    (root / "pyproject.toml").write_text("[tool.validator.map\n")
    with pytest.raises(MapError, match="invalid TOML"):  # nothing to grade around
        load_package(root, catalogue(), strict=False)


def test_invalid_toml_unknown_keys_and_parameter_tables(tmp_path):
    root = copy_package(tmp_path)
    (root / "pyproject.toml").write_text("[tool.validator.map\n")
    with pytest.raises(MapError, match="pyproject.toml: invalid TOML"):
        load_package(root, catalogue())
    (root / "pyproject.toml").write_text('[tool.validator]\nmapping = {}\n'
                                         '[tool.validator.parameters."token_embedding.Embedding"]\nwieght = "table"\n')
    with pytest.raises(MapError) as info:
        load_package(root, catalogue())
    assert "unknown key tool.validator.mapping" in str(info.value)
    assert "'wieght' is not a parameter of the contract; its parameters: weight" in str(info.value)


def test_map_file_given_with_map_uses_its_top_level_tables(tmp_path):
    root = copy_package(tmp_path)
    (root / "pyproject.toml").unlink()
    mapping = tmp_path / "course-map.toml"
    mapping.write_text('[map]\n"token_embedding.Embedding" = "cs336_basics.model:MyEmbedding"\n')
    package = load_package(root, catalogue(), map_path=mapping, map_arg=str(mapping))
    assert package.mapped_challenges(list(catalogue())) == ["token_embedding"]
    assert not is_package_root(root)


def test_top_level_names_sees_imports_and_conditionals():
    assert {"A", "f", "x", "np"} <= top_level_names(b"import numpy as np\nclass A: pass\nif 1:\n  def f(): pass\nx = 1\n")
    assert top_level_names(b"from m import *\n") is None


@pytest.mark.parametrize("argv_extra, said", [
    (["--map", "missing.toml"], "--map missing.toml: no such file"),
    ([], "unknown challenge 'nosuch'"),
])
def test_cli_usage_error_exit_2_without_traceback(tmp_path, argv_extra, said):
    from validator.cli import main

    root = copy_package(tmp_path)
    (root / "pyproject.toml").write_text('[tool.validator.map]\n"nosuch.Embedding" = "cs336_basics.model:MyEmbedding"\n')
    err = io.StringIO()
    with redirect_stderr(err):
        code = main(["submit-build", "--student", str(root), "--no-input", *argv_extra])
    assert code == 2
    assert said in err.getvalue() and "Traceback" not in err.getvalue()


# -- constructor arguments by position, parameters by mapping or shape -------------------------------
def test_keywords_go_by_position_where_the_names_differ():
    class Student:
        def __init__(self, vocab, dim, dev=None, dt=None):
            pass

    order = ["num_embeddings", "embedding_dim", "device", "dtype"]
    assert bind_by_position(Student, [5, 3], {"dtype": torch.float64}, order) == ([5, 3, None, torch.float64], {})
    assert bind_by_position(Student, [5, 3], {"device": "meta"}, order) == ([5, 3, "meta"], {})

    class Named:
        def __init__(self, vocab, dim, device=None, dtype=None):
            pass

    assert bind_by_position(Named, [5, 3], {"dtype": torch.float64}, order) == ([5, 3], {"dtype": torch.float64})

    class NoDefault:
        def __init__(self, vocab, dim, dev, dt=None):
            pass

    assert bind_by_position(NoDefault, [5, 3], {"dtype": 1}, order) == ([5, 3], {"dtype": 1})  # TypeError tells

    class SameDevice:  # device keeps the contract's name, dtype is renamed: device fills its own place
        def __init__(self, vocab, dim, device=None, dt=None):
            pass

    assert bind_by_position(SameDevice, [5, 3], {"device": "meta", "dtype": torch.float64}, order) == \
        ([5, 3, "meta", torch.float64], {})


def test_parameter_ties_are_settled_by_the_mapping_or_explained():
    found = [{"name": n, "shape": [4, 4]} for n in ("wq.weight", "wk.weight", "wv.weight", "wo.weight")]
    expected = {"q_proj.weight": (4, 4), "k_proj.weight": (4, 4), "v_proj.weight": (4, 4), "output_proj.weight": (4, 4)}
    assert match_parameters(expected, found)[0] is None
    explicit = {"q_proj.weight": "wq.weight", "k_proj.weight": "wk.weight", "v_proj.weight": "wv.weight",
                "output_proj.weight": "wo.weight"}
    assert match_parameters(expected, found, explicit)[0] == explicit
    advice = lambda name, options: f"map {name} to one of {options}"  # noqa: E731
    why = unmatched_parameters(expected, found, None, advice)
    assert "4 of your parameters have the shape (4, 4)" in why and "map q_proj.weight to one of" in why
    why = unmatched_parameters(expected, found, {"q_proj.weight": "query.weight"}, advice)
    assert "registers no parameter 'query.weight'" in why


def test_a_tie_the_module_paths_settle_is_not_reported_as_a_tie():
    """Only the leaf renamed (`ln1.W`, `ln2.W`): the module holding each says which norm it is; the
    projections, renamed along their path too (`attn.wq.W`), still tie and need the mapping."""
    found = [{"name": n, "shape": [8]} for n in ("ln1.W", "ln2.W")] + \
        [{"name": f"attn.{n}.W", "shape": [8, 8]} for n in ("wq", "wk")]
    expected = {"ln1.weight": (8,), "ln2.weight": (8,), "attn.q_proj.weight": (8, 8), "attn.k_proj.weight": (8, 8)}
    assert match_parameters(expected, found)[0] is None
    assert tied_parameters(expected, found) == ("attn.q_proj.weight", ["attn.wq.W", "attn.wk.W"])
    explicit = {"attn.q_proj.weight": "attn.wq.W", "attn.k_proj.weight": "attn.wk.W"}
    mapping, _ = match_parameters(expected, found, explicit)
    assert mapping == {**explicit, "ln1.weight": "ln1.W", "ln2.weight": "ln2.W"}
    assert tied_parameters(expected, found, explicit) is None
    swapped = [{"name": n, "shape": [8]} for n in ("ln2.W", "ln1.W")]
    assert match_parameters({"ln1.weight": (8,), "ln2.weight": (8,)}, swapped)[0] == \
        {"ln1.weight": "ln1.W", "ln2.weight": "ln2.W"}


def test_a_tie_the_stems_settle_is_not_reported_as_a_tie():
    """Plain `w1`/`w3` Parameters are matched by stem; a wrong-shaped `w2` is what the message must name."""
    found = [{"name": "w1", "shape": [8, 4]}, {"name": "w3", "shape": [8, 4]}, {"name": "w2", "shape": [8, 4]}]
    expected = {"w1.weight": (8, 4), "w2.weight": (4, 8), "w3.weight": (8, 4)}
    assert match_parameters(expected, found)[0] is None
    why = unmatched_parameters(expected, found, None, lambda name, options: "rename")
    assert "registers no parameter of shape (4, 8) for the contract's 'w2.weight'" in why, why


# -- the source scan follows the package's own imports -----------------------------------------------
def test_scan_package_follows_relative_imports_and_parent_inits(tmp_path):
    root = copy_package(tmp_path)
    patch(root, "cs336_basics/nn_utils.py", "    picked = table.index_select(0, ids.reshape(-1))\n",
          "    picked = torch.nn.functional.embedding(ids.reshape(-1), table)\n")
    (root / "cs336_basics" / "__init__.py").write_text("import threading\nthreading.Thread\n")
    package = load_package(root, catalogue())
    found = scan_package(package.data, ["cs336_basics.model"], ["torch.nn.functional.embedding"])
    where = {(f.file, f.line, f.what) for f in found}
    line = (root / "cs336_basics/nn_utils.py").read_text().splitlines().index(
        "    picked = torch.nn.functional.embedding(ids.reshape(-1), table)") + 1
    assert ("cs336_basics/nn_utils.py", line, "torch.nn.functional.embedding") in where
    assert ("cs336_basics/__init__.py", 2, "threads") in where


def test_forbidden_import_in_a_submodule_fails_forbidden_source(tmp_path):
    root = copy_package(tmp_path)
    patch(root, "cs336_basics/nn_utils.py", "import torch\n", "import torch\nfrom torch.nn.functional import embedding as emb\n")
    patch(root, "cs336_basics/nn_utils.py", "    picked = table.index_select(0, ids.reshape(-1))\n",
          "    picked = emb(ids.reshape(-1), table)\n")
    package = load_package(root, catalogue())
    report = grade(root, challenges=["token_embedding"], seed=1, profile="quick", catalogue=catalogue(),
                   package=package, checks=["no_library_embedding_source"], student_arg=str(root))
    check = report.challenges[0].checks[0]
    line = (root / "cs336_basics/nn_utils.py").read_text().splitlines().index(
        "    picked = emb(ids.reshape(-1), table)") + 1
    assert check.status == "failed"
    assert f"cs336_basics/nn_utils.py:{line}" in check.message and "torch.nn.functional.embedding" in check.message
    assert f"--student {root}" in check.reproduce


# -- verdicts: in place, and the same code copied into layers.py -------------------------------------
@pytest.mark.parametrize("challenge", [pytest.param("rms_norm", marks=pytest.mark.thorough),
                                       pytest.param("multihead_self_attention", marks=pytest.mark.thorough),
                                       "transformer_block"])
def test_transformer_layers_in_place_get_the_verdicts_of_their_layers_copy(tmp_path, challenge):
    """Renamed classes, arguments and parameters (ties settled by the mapping) in the CS336 layout. The block
    (whose mapping names its attention's and feed-forward's tied projections and its norms) in the default
    tier; its norm and attention on their own too with --thorough."""
    in_place, copied = grade_both(FIXTURE, tmp_path, [challenge])
    assert verdicts(in_place) == verdicts(copied)
    assert set(verdicts(in_place).values()) == {"passed"}, verdicts(in_place)


@pytest.mark.thorough
def test_norms_renamed_only_in_the_leaf_need_no_mapping(tmp_path):
    """The block's norms hold `gain` for the contract's `weight` (`ln1.gain`, `ln2.gain`, the same shape):
    their module paths tell them apart, so the mapping only needs the projections, whose paths differ."""
    root = copy_package(tmp_path)
    patch(root, "pyproject.toml", '"ln1.weight" = "ln1.gain"\n"ln2.weight" = "ln2.gain"\n', "")
    report = grade(root, challenges=["transformer_block"], seed=3, profile="quick", catalogue=catalogue(),
                   package=load_package(root, catalogue()),
                   checks=["parameters", "wiring", "matches_reference", "gradient"])
    assert set(verdicts(report).values()) == {"passed"}, {c.id: c.message for c in report.challenges[0].checks}
    said = next(c for c in report.challenges[0].checks if c.id == "parameters").message
    assert "ln1.weight = your ln1.gain" in said and "ln2.weight = your ln2.gain" in said


def test_package_in_place_gets_the_verdicts_of_its_layers_copy(tmp_path):
    in_place, copied = grade_both(FIXTURE, tmp_path, ["token_embedding"])
    assert verdicts(in_place) == verdicts(copied)
    assert set(verdicts(in_place).values()) == {"passed"}
    result = in_place.challenges[0]
    assert result.implementations == {"Embedding": "cs336_basics.model:MyEmbedding (cs336_basics/model.py)"}
    assert "cs336_basics.model:MyEmbedding" in next(c for c in result.checks if c.id == "parameters").message


@pytest.mark.thorough
def test_every_mapped_challenge_in_place_matches_its_layers_copy(tmp_path):
    for seed in (5, 11):
        in_place, copied = grade_both(FIXTURE, tmp_path / str(seed), MAPPED, seed=seed)
        assert verdicts(in_place) == verdicts(copied)
        assert set(verdicts(in_place).values()) == {"passed"}, verdicts(in_place)


BROKEN = [
    # (file, old, new, a check the bug must cost)
    ("cs336_basics/model.py", "a=-3.0, b=3.0", "a=-2.0, b=2.0", "token_embedding/init_distribution"),
    ("cs336_basics/nn_utils.py", "picked = table.index_select(", "picked = table.detach().index_select(",
     "token_embedding/weight_gradient"),
    ("cs336_basics/model.py", "return x + self.pe[:seq_len]", "return x + self.pe[:seq_len].detach()",
     "learned_positional_embedding/gradient"),
    # post-norm: the block's own wiring, graded with the grader's stand-ins for the package's sublayers
    ("cs336_basics/transformer.py", "h = x + self.attn(self.ln1(x))", "h = self.ln1(x + self.attn(x))",
     "transformer_block/wiring"),
]


@pytest.mark.thorough
@pytest.mark.parametrize("rel, old, new, costs", BROKEN)
def test_broken_package_fails_the_same_checks_as_its_layers_copy(tmp_path, rel, old, new, costs):
    root = copy_package(tmp_path)
    patch(root, rel, old, new)
    challenge = costs.split("/")[0]
    in_place, copied = grade_both(root, tmp_path, [challenge])
    failing = {k for k, v in verdicts(in_place).items() if v != "passed"}
    assert failing == {k for k, v in verdicts(copied).items() if v != "passed"}
    assert costs in failing


@pytest.mark.thorough
def test_errors_name_the_students_class_file_and_map(tmp_path):
    root = copy_package(tmp_path)
    patch(root, "cs336_basics/model.py", "        return lookup_rows(token_ids, self.table)\n",
          "        raise RuntimeError('not yet')\n")
    mapping = tmp_path / "map.toml"
    shutil.move(root / "pyproject.toml", mapping)
    package = load_package(root, catalogue(), map_path=mapping, map_arg=str(mapping))
    report = grade(root, challenges=["token_embedding"], seed=2, profile="quick", catalogue=catalogue(),
                   package=package, student_arg=str(root), checks=["output_shape"])
    check = report.challenges[0].checks[0]
    assert check.status == "error"
    assert "calling cs336_basics.model:MyEmbedding raised RuntimeError: not yet" in check.message
    assert "at cs336_basics/model.py:" in check.message
    assert f"--student {root} --map {mapping}" in check.reproduce


@pytest.mark.thorough
def test_batch_grades_a_package_submission_in_the_sandbox(tmp_path):
    from validator.batch.grade import grade_folder

    subs = tmp_path / "subs"
    copy_package(subs, "alice")
    layers_copy(FIXTURE, subs / "bob")
    broken = copy_package(subs, "carol")
    (broken / "pyproject.toml").write_text('[tool.validator.map]\n"token_embedding.Embedding" = "cs336_basics.x:Y"\n')
    out = tmp_path / "out"
    code = grade_folder(submissions=subs, out=out, challenges=["token_embedding"], workers=1, timeout=120,
                        stream=io.StringIO(), live=False)
    assert code == 0
    alice, bob, carol = (json.loads((out / f"{n}.json").read_text()) for n in ("alice", "bob", "carol"))
    checks = lambda r: {c["id"]: c["status"] for c in r["challenges"][0]["checks"] if c["kind"] != "question"}  # noqa: E731
    assert checks(alice) == checks(bob) and set(checks(alice).values()) == {"passed"}
    assert alice["challenges"][0]["implementations"]["Embedding"].startswith("cs336_basics.model:MyEmbedding")
    assert carol["challenges"][0]["score"] == 0 and "no module cs336_basics.x" in carol["challenges"][0]["problem"]


def test_a_module_that_fails_to_import_costs_only_its_entries(tmp_path):
    root = copy_package(tmp_path)
    patch(root, "cs336_basics/model.py", "from .nn_utils import lookup_rows\n",
          "from .nn_utils import lookup_rows\n\nraise ImportError('half-finished refactor')\n")
    line = (root / "cs336_basics/model.py").read_text().splitlines().index("raise ImportError('half-finished refactor')") + 1
    report = grade(root, challenges=["token_embedding", "embedding_functional"], seed=1, profile="quick",
                   catalogue=catalogue(), package=load_package(root, catalogue()), checks=["signature"])
    broken, fine = report.challenges
    assert "cs336_basics.model:MyEmbedding (token_embedding.Embedding, in cs336_basics/model.py) could not be loaded" \
        in broken.problem
    assert f"cs336_basics/model.py:{line}" in broken.problem and "half-finished refactor" in broken.problem
    assert broken.checks[0].status == "error"
    assert fine.problem is None and fine.checks[0].status == "passed"
    assert "lookup_rows" in fine.checks[0].message


TIED_SPEC = """
id: two_proj
title: Two projections of the same shape
entries:
  TwoProj:
    kind: module
    init: [d]
    call: [x]
    parameters:
      q.weight: [d, d]
      k.weight: [d, d]
dims:
  d: [2, 5]
inputs:
  x: {type: float, shape: ["...", d]}
checks:
  - {id: parameters, kind: structure, test: parameters, points: 1}
  - {id: matches_reference, kind: values, test: values, points: 1, max_examples: 3}
"""

TIED_REFERENCE = """
from torch import nn


class TwoProj(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)

    def forward(self, x):
        return self.q(x) + 2 * self.k(x)
"""

TIED_STUDENT = """
from torch import nn


class Mine(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.wa = nn.Linear(width, width, bias=False)
        self.wb = nn.Linear(width, width, bias=False)

    def forward(self, x):
        return self.wa(x) + 2 * self.wb(x)
"""


@pytest.mark.parametrize("table, statuses", [
    ("", {"parameters": "failed", "matches_reference": "error"}),
    ('"q.weight" = "wa.weight"\n"k.weight" = "wb.weight"\n', {"parameters": "passed", "matches_reference": "passed"}),
    ('"q.weight" = "wb.weight"\n"k.weight" = "wa.weight"\n', {"parameters": "passed", "matches_reference": "failed"}),
])
def test_tied_shapes_need_the_parameters_table(tmp_path, table, statuses):
    from validator.spec import load_catalogue

    specs, ref, root = tmp_path / "challenges", tmp_path / "reference", tmp_path / "pkg"
    for folder in (specs, ref, root / "proj"):
        folder.mkdir(parents=True)
    (specs / "two_proj.yaml").write_text(TIED_SPEC)
    (ref / "layers.py").write_text(TIED_REFERENCE)
    (ref / "answer_key.yaml").write_text("{}\n")
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "mod.py").write_text(TIED_STUDENT)
    (root / "pyproject.toml").write_text('[tool.validator.map]\n"two_proj.TwoProj" = "proj.mod:Mine"\n'
                                         + (f'[tool.validator.parameters."two_proj.TwoProj"]\n{table}' if table else ""))
    cat = load_catalogue(specs)
    report = grade(root, seed=1, profile="quick", catalogue=cat, challenges_dir=specs, reference_dir=ref,
                   package=load_package(root, cat))
    got = {c.id: c for c in report.challenges[0].checks}
    assert {k: c.status for k, c in got.items()} == statuses, {k: c.message for k, c in got.items()}
    if not table:
        said = got["parameters"].message
        assert "2 of your parameters have the shape (3, 3) of the contract's 'q.weight' (wa.weight, wb.weight)" in said
        assert '[tool.validator.parameters."two_proj.TwoProj"] with "q.weight" = "wa.weight"' in said
        assert "cannot tell which one" in got["matches_reference"].message


def test_signature_in_place_needs_the_contracts_positions_not_its_names(tmp_path):
    root = copy_package(tmp_path)
    patch(root, "cs336_basics/model.py", "def __init__(self, vocab_size, d_model, device=None, dtype=None):",
          "def __init__(self, vocab_size, d_model, *, device=None):")
    report = grade(root, challenges=["token_embedding"], seed=1, profile="quick", catalogue=catalogue(),
                   package=load_package(root, catalogue()), checks=["signature"])
    check = report.challenges[0].checks[0]
    assert check.status == "failed"
    assert "cs336_basics.model:MyEmbedding" in check.message
    assert "takes 2 argument(s) by position, but the contract passes 4 (num_embeddings, embedding_dim, device, dtype)" \
        in check.message


def test_package_files_are_read_under_the_intake_bounds(tmp_path):
    import os

    from validator import package as package_module

    root = copy_package(tmp_path)
    os.symlink("/etc/passwd", root / "cs336_basics" / "linked.py")
    os.symlink(root / "cs336_basics", root / "alias")
    (root / ".venv").mkdir()
    (root / ".venv" / "huge.py").write_text("x = 1\n")
    files, data, problems = package_module.read_files(root)
    assert problems == [] and "cs336_basics/linked.py" not in data and not any(r.startswith(("alias/", ".venv/")) for r in data)
    (root / "cs336_basics" / "big.py").write_bytes(b"#" * ((1 << 20) + 1))
    with pytest.raises(MapError, match="cs336_basics/big.py is larger than 1 MiB"):
        load_package(root, catalogue())
    (root / "cs336_basics" / "big.py").unlink()
    many = root / "many"
    many.mkdir()
    for i in range(package_module.MAX_PACKAGE_FILES):
        (many / f"m{i}.py").write_text("")
    said = (f"holds 204 Python files, more than {package_module.MAX_PACKAGE_FILES}, the limit for a submission "
            "(200 in many/, 4 in cs336_basics/): not graded")
    with pytest.raises(MapError, match=re.escape(said)):
        load_package(root, catalogue())


@pytest.mark.thorough
def test_pytest_plugin_grades_a_package_in_place(tmp_path):
    import subprocess
    import sys
    import xml.etree.ElementTree as ET

    root = copy_package(tmp_path)
    patch(root, "cs336_basics/model.py", "a=-3.0, b=3.0", "a=-2.0, b=2.0")
    xml = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator", "--validator-student", str(root),
           "--validator-challenge", "token_embedding", "--validator-seed", "5", "--validator-profile", "quick",
           f"--junitxml={xml}", "-q", "-o", "addopts=", "-k", "init_distribution or parameters or signature"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    failed = {case.get("name").split("::")[-1] for case in ET.parse(xml).getroot().iter("testcase")
              if case.find("failure") is not None or case.find("error") is not None}
    assert failed == {"init_distribution"}
    assert f"--student {root}" in proc.stdout


def test_unmapped_entries_fall_back_to_default_then_layers_py(tmp_path):
    root = copy_package(tmp_path)
    (root / "cs336_basics" / "layers.py").write_text("from .nn_utils import lookup_rows as embedding\n")
    (root / "pyproject.toml").write_text('[tool.validator]\ndefault = "cs336_basics.layers"\n'
                                         '[tool.validator.map]\n"token_embedding.Embedding" = "cs336_basics.model:MyEmbedding"\n')
    package = load_package(root, catalogue())
    fallback = package.target("embedding_functional", "embedding")
    assert (fallback.label, fallback.file, fallback.key) == ("cs336_basics.layers:embedding", "cs336_basics/layers.py", "")
    assert "(it is not defined in cs336_basics.layers)" in package.unmapped["tied_lm_head"]["TiedEmbeddingLM"]
    (root / "pyproject.toml").write_text('[tool.validator]\ndefault = "cs336_basics.layer"\n')
    with pytest.raises(MapError, match="tool.validator.default = 'cs336_basics.layer': no module cs336_basics.layer"):
        load_package(root, catalogue())
    (root / "pyproject.toml").write_text("[tool.validator.map]\n")
    (root / "layers.py").write_text("def embedding(token_ids, weight):\n    return weight[token_ids]\n")
    package = load_package(root, catalogue())
    assert package.target("embedding_functional", "embedding").label == "layers:embedding"
    assert package.mapped_challenges(list(catalogue())) == ["embedding_functional"]


# -- a package imports as it does for its author (issue 19) --------------------------------------------
IMPORTS = Path(__file__).resolve().parent / "packages" / "cs336_imports"
ABSENT = ("wandb", "tqdm", "regex", "numpy")  # absent from the grader's environment; checked, never assumed


def absent(name: str) -> bool:
    import importlib.util

    return name not in sys.modules and importlib.util.find_spec(name) is None


@pytest.fixture
def staged(tmp_path):
    """The cs336_imports fixture as the worker sees it: staged, its machinery installed in this process."""
    from validator.worker.imports import StagedPackage

    package = load_package(IMPORTS, catalogue())
    importer = StagedPackage(package.stage(tmp_path / "staged"))
    importer.install()
    yield importer
    importer.uninstall()


def test_the_handouts_init_reads_the_staged_metadata_and_absent_tools_become_placeholders(staged):
    package = staged.import_module("cs336_basics")
    assert package.__version__ == "1.0.3"  # importlib.metadata.version("cs336_basics"), project "cs336-basics"
    assert package.kernels is None  # `try: import ... except ImportError:` gets Python's error: the fallback runs
    assert "placeholder" in repr(package.RUN)  # wandb.run: attribute access at import survives
    notes = " ".join(staged.notes())
    assert "cs336_experiment_tracker is not installed in the grader's environment: importing it in " \
           "cs336_basics/__init__.py line 11 gave a placeholder" in notes
    for name in ("wandb", "tqdm", "regex"):
        assert (f"{name} is not installed" in notes) == absent(name)
    assert "cs336_fast_kernels" not in notes and "cs336_experiment_tracker" not in sys.modules


def test_module_level_uses_survive_and_a_real_use_names_the_module(staged):
    model = staged.import_module("cs336_basics.model")
    assert model.CONFIG == {"init_std": 1.0, "truncate_at": 3.0}  # the JSON file next to it was staged
    layer = model.TokenEmbedding(5, 3)
    assert layer(torch.tensor([0, 4])).shape == (2, 3)  # isinstance(ids, np.ndarray) is False, not an error
    adapters = staged.import_module("tests.adapters")  # numpy.typing and jaxtyping at its top
    assert torch.allclose(adapters.run_softmax(torch.zeros(2, 4), -1), torch.full((2, 4), 0.25))
    if absent("numpy"):
        annotation = model.to_tensor.__annotations__["array"]  # npt.NDArray[np.float32], evaluated at import
        assert "numpy.typing.NDArray" in repr(annotation)
        assert "numpy" not in sys.modules  # a library probing for numpy still finds none
        with pytest.raises(ModuleNotFoundError, match="cannot call numpy.zeros: the grader's environment does not "
                                                      "have the module 'numpy' \\(imported in cs336_basics/model.py line 6"):
            model.np.zeros(3)
    logged = staged.import_module("cs336_basics.logged")
    if absent("wandb"):
        with pytest.raises(ModuleNotFoundError, match="cannot call wandb.log: the grader's environment does not have "
                                                      "the module 'wandb' \\(imported in cs336_basics/logged.py line 3\\)"):
            logged.embedding_logged(torch.tensor([0]), torch.ones(2, 2))


def test_a_use_at_import_fails_that_module_naming_what_is_missing(staged):
    if not absent("regex"):
        pytest.skip("regex is installed here")
    with pytest.raises(ModuleNotFoundError, match="cannot call regex.compile: the grader's environment does not have "
                                                  "the module 'regex' \\(imported in cs336_basics/tokenizer.py line 3\\)"):
        staged.import_module("cs336_basics.tokenizer")
    assert "cs336_basics.tokenizer" not in sys.modules
    assert staged.import_module("cs336_basics.nn_utils").softmax  # its siblings still import


def test_syntax_newer_than_the_graders_python_is_named(staged):
    if sys.version_info >= (3, 12):
        assert staged.import_module("cs336_basics.typed").Linear
        return
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    with pytest.raises(SyntaxError) as info:
        staged.import_module("cs336_basics.typed")
    assert info.value.msg == (f"cs336_basics/typed.py line 8 uses syntax this grader's Python ({here}) cannot parse "
                              "(a `type` alias statement (PEP 695), new in Python 3.12): write `Name = ...` or "
                              "`Name: TypeAlias = ...`")
    assert info.value.lineno == 8


@pytest.mark.parametrize("source, said", [
    ("def first[T](xs: list[T]) -> T:\n    return xs[0]\n", "type parameters in brackets (PEP 695 generics)"),
    ("class Box[T]:\n    pass\n", "type parameters in brackets (PEP 695 generics)"),
    ("type Vec[T] = list[T]\n", "a `type` alias statement (PEP 695)"),
    ("d = {'a': 1}\ns = f'{d['a']}'\n", "an f-string that reuses its own quotes"),
    ("try:\n    pass\nexcept ValueError, TypeError:\n    pass\n", "several exception types without parentheses"),
])
def test_each_newer_construct_is_named(source, said):
    from validator.worker.imports import newer_syntax

    try:
        compile(source, "m.py", "exec")
    except SyntaxError as exc:
        better = newer_syntax(exc, "pkg/m.py")
        assert better is not None and said in better.msg and better.msg.startswith("pkg/m.py line ")
    else:
        pytest.skip("this Python parses it")
    with pytest.raises(SyntaxError) as info:
        compile("x = = 1\n", "m.py", "exec")
    assert newer_syntax(info.value, "pkg/m.py") is None  # a plain mistake stays Python's own message


def test_placeholders_never_shadow_an_installed_module_or_one_of_the_package(staged, tmp_path):
    root = Path(staged.root)
    (root / "cs336_basics" / "probe.py").write_text(
        "import importlib.util\n"
        "FOUND = importlib.util.find_spec('cs336_experiment_tracker')\n"
        "def own():\n    import cs336_basics.nosuch\n"
        "def installed():\n    import torch.nosuch\n"
        "def relative():\n    from . import nosuch\n"
        "def grader():\n    import reference\n    return reference\n"
        "def absent():\n    import cs336_experiment_tracker\n    return cs336_experiment_tracker\n")
    probe = staged.import_module("cs336_basics.probe")
    assert probe.FOUND is None
    for name in ("own", "installed", "relative"):
        with pytest.raises(ImportError, match="nosuch"):
            getattr(probe, name)()
    try:
        found = probe.grader()
    except ImportError:
        found = None  # the sandboxed worker: the grader's reference is out of reach
    assert "placeholder" not in repr(found)  # here: the real (namespace) folder, never a stand-in
    assert "placeholder" in repr(probe.absent())  # an import at call time gets one too


def test_a_name_an_installed_module_lacks_becomes_a_placeholder(staged):
    """``from torch.serialization import FILE_LIKE`` (the course's torch 2.6 had it, the grader's newer torch has not),
    in a module that ``tests/adapters.py`` imports but no graded layer runs, must not cost the whole repository: the
    name becomes a placeholder, named in a note, and only a real use fails, naming it. The package's own modules, the
    grader's and a guarded import still get Python's ImportError."""
    root = Path(staged.root)
    (root / "cs336_basics" / "checkpointing.py").write_text(
        "from typing import Union\n"
        "from torch.serialization import NO_SUCH_NAME_IN_TORCH, save\n"
        "PATHLIKE = Union[str, NO_SUCH_NAME_IN_TORCH]\n"
        "def save_checkpoint(out: NO_SUCH_NAME_IN_TORCH):\n    return NO_SUCH_NAME_IN_TORCH(out)\n"
        "try:\n    from torch.serialization import ALSO_NOT_IN_TORCH as FALLBACK\n"
        "except ImportError:\n    FALLBACK = 'the author fell back'\n"
        "def own():\n    from cs336_basics.model import nosuch\n"
        "def grader():\n    from validator import nosuch\n")
    module = staged.import_module("cs336_basics.checkpointing")
    import torch.serialization

    assert module.save is torch.serialization.save and module.FALLBACK == "the author fell back"
    assert "placeholder" in repr(module.save_checkpoint.__annotations__["out"])
    with pytest.raises(ModuleNotFoundError, match="cannot call torch.serialization.NO_SUCH_NAME_IN_TORCH: the grader's "
                                                  "environment does not have torch.serialization.NO_SUCH_NAME_IN_TORCH "
                                                  r"\(its torch .* has no such name\) \(imported in "
                                                  r"cs336_basics/checkpointing.py line 2\)"):
        module.save_checkpoint("out.pt")
    for name in ("own", "grader"):
        with pytest.raises(ImportError, match="nosuch"):
            getattr(module, name)()
    notes = " ".join(staged.notes())
    assert "torch.serialization has no NO_SUCH_NAME_IN_TORCH in the grader's environment (torch " in notes
    assert "importing it in cs336_basics/checkpointing.py line 2 gave a placeholder" in notes
    assert "ALSO_NOT_IN_TORCH" not in notes


def test_a_typing_name_of_a_later_python_is_typing_extensions_backport(staged):
    """``from typing import override`` (Python 3.12; a real repository decorated every forward with it) made the
    whole repository fail to import on the grader's Python 3.11: typing_extensions' backport, which torch itself
    requires, stands in for it and works as the decorator does, and a note says so."""
    import typing

    import typing_extensions

    if hasattr(typing, "override"):
        pytest.skip("this Python's typing has override")
    root = Path(staged.root)
    (root / "cs336_basics" / "overrides.py").write_text(
        "from typing import Union, override\n"
        "import torch\n"
        "class Layer(torch.nn.Module):\n"
        "    @override\n"
        "    def forward(self, x: Union[int, float]):\n        return x + 1\n")
    module = staged.import_module("cs336_basics.overrides")
    assert module.override is typing_extensions.override and module.Layer()(1) == 2
    assert module.Layer.forward.__override__ is True
    notes = " ".join(staged.notes())
    assert "has no typing.override: typing_extensions' backport of each was used" in notes, notes
    assert "typing has no override" not in notes  # not a placeholder's note


def test_placeholders_are_harmless_classes(staged):
    from validator.worker.imports import MissingModule

    np = MissingModule("numpy", "numpy", "m.py line 1")
    assert not isinstance(torch.zeros(1), np.ndarray) and np.ndarray | None is not None
    assert np.typing.NDArray[np.float32] is np.typing.NDArray and np.float32 is np.float32
    assert bool(np.ndarray)

    class Mine(np.ndarray):
        pass

    uses = [lambda: np.zeros(3), lambda: Mine(), lambda: list(np.ndarray), lambda: np.float32 + 1,
            lambda: 2 * np.pi, lambda: -np.e, lambda: len(np.ndarray), lambda: float(np.pi)]
    for use in uses:
        with pytest.raises(ModuleNotFoundError, match="the grader's environment does not have the module 'numpy'"):
            use()
    with pytest.raises(ModuleNotFoundError):
        with np.errstate():
            pass
    with pytest.raises(AttributeError):
        np.__array__  # noqa: B018 - dunders are never invented
    with pytest.raises(AttributeError):
        np.ndarray.__array_interface__  # noqa: B018
    assert np.ndarray.__module__ == "numpy" and np.ndarray._missing_where == "m.py line 1"


def test_a_failed_import_leaves_no_half_imported_module(staged):
    root = Path(staged.root)
    (root / "cs336_basics" / "__init__.py").write_text("from . import nn_utils\nraise RuntimeError('broken init')\n")
    for _ in range(2):  # the same error every time, whatever was imported before
        with pytest.raises(RuntimeError, match="broken init"):
            staged.import_module("cs336_basics.nn_utils")
        assert not [m for m in sys.modules if m.startswith("cs336_basics")]


def test_the_handouts_init_is_no_dynamic_code_for_the_source_checks():
    package = load_package(IMPORTS, catalogue())
    found = [f for f in scan_package(package.data, ["cs336_basics.model"], ["torch.nn.functional.embedding"],
                                     entries=[("cs336_basics.model", "TokenEmbedding")])
             if not f.advice_only]  # advice: `RUN = wandb.run` (no graded code reads it), logged.py (nothing imports it)
    assert found == [], [f.describe() for f in found]
    init = package.data["cs336_basics/__init__.py"] + b"importlib.metadata.entry_points()\n"
    found = scan_package({**package.data, "cs336_basics/__init__.py": init}, ["cs336_basics.model"], [],
                         entries=[("cs336_basics.model", "TokenEmbedding")])
    assert [f.what for f in found if not f.advice_only] == ["dynamic_code"]  # entry points load code: flagged


def test_staged_copy_holds_the_scanned_bytes_data_files_and_metadata(tmp_path):
    root = tmp_path / "pkg"
    shutil.copytree(IMPORTS, root)
    package = load_package(root, catalogue())
    assert set(package.resources) == {"cs336_basics/config.json", "pyproject.toml"}
    assert package.generated == {"cs336_basics-1.0.3.dist-info/METADATA":
                                 b"Metadata-Version: 2.1\nName: cs336-basics\nVersion: 1.0.3\n"}
    (root / "cs336_basics" / "model.py").write_text("raise SystemExit('changed after the scan')\n")
    files = package.sandbox_files()
    assert set(files) == set(package.data) | set(package.resources) | set(package.generated)
    assert all(not Path(p).is_relative_to(root) for p in files.values())  # never the live folder
    assert Path(files["cs336_basics/model.py"]).read_bytes() == package.data["cs336_basics/model.py"]
    staged = Path(files["pyproject.toml"]).parent
    del package
    assert not staged.exists()  # the private copy goes with the package


@pytest.mark.parametrize("pyproject, init, version, note", [
    ('[project]\nname = "cs336_basics"\nversion = "2.0"\n', "", "2.0", None),
    ('[project]\nname = "cs336_basics"\ndynamic = ["version"]\n[tool.setuptools.dynamic]\n'
     'version = {attr = "cs336_basics.__version__"}\n', '__version__ = "3.1"\n', "3.1", None),
    ('[project]\nname = "cs336_basics"\ndynamic = ["version"]\n[tool.hatch.version]\npath = "cs336_basics/__init__.py"\n',
     '__version__ = "4.2"\n', "4.2", None),
    ('[project]\nname = "cs336_basics"\ndynamic = ["version"]\n', "", "0.0.0", "its version is dynamic"),
    ('[project]\nname = "cs336_basics"\n', "", "0.0.0", "it gives no version"),
    ('[tool.poetry]\nversion = "5.0"\n', "", "5.0", None),
    ("", "", "0.0.0", "pyproject.toml has no [project] name and version"),
])
def test_package_metadata_when_the_version_is_dynamic_or_missing(tmp_path, pyproject, init, version, note):
    from validator.package import package_metadata

    (tmp_path / "pyproject.toml").write_text(pyproject)
    code = {"cs336_basics/__init__.py": (init + 'import importlib.metadata\n').encode(), "tests/__init__.py": b""}
    files, notes = package_metadata(tmp_path, code)
    assert files == {f"cs336_basics-{version}.dist-info/METADATA":
                     f"Metadata-Version: 2.1\nName: cs336_basics\nVersion: {version}\n".encode()}
    assert [n for n in notes if note and note in n and f"returns '{version}'" in n] if note else notes == []


def test_package_metadata_under_the_project_name_and_each_import_package(tmp_path):
    from validator.package import package_metadata

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "my-llm-homework"\nversion = "1.2"\n')
    files, _ = package_metadata(tmp_path, {"cs336_basics/__init__.py": b"", "tests/__init__.py": b"",
                                           "scripts/train.py": b""})
    assert sorted(files) == ["cs336_basics-1.2.dist-info/METADATA", "my_llm_homework-1.2.dist-info/METADATA"]


def _statuses(result) -> dict[str, str]:
    return {c.id: c.status for c in result.checks if c.kind != "question"}


@pytest.mark.thorough
def test_a_cs336_repository_is_graded_as_it_imports_for_its_author():
    """The fixture end to end: the handout's __init__, placeholders, data file, adapters, newer syntax."""
    package = load_package(IMPORTS, catalogue())
    report = grade(IMPORTS, challenges=["token_embedding", "softmax", "embedding_functional", "rms_norm", "linear"],
                   seed=4, profile="quick", catalogue=catalogue(), package=package)
    got = {ch.id: ch for ch in report.challenges}
    embedding = _statuses(got["token_embedding"])
    assert {k for k, v in embedding.items() if v != "passed"} <= {"negative_id_flagged"}, embedding  # advice only
    assert embedding["no_library_embedding_source"] == "passed"  # the handout's importlib.metadata is no dynamic code
    assert set(_statuses(got["softmax"]).values()) == {"passed"}, _statuses(got["softmax"])
    if sys.version_info < (3, 12):
        assert "cs336_basics/typed.py line 8 uses syntax this grader's Python" in got["linear"].problem
        assert "a `type` alias statement (PEP 695), new in Python 3.12" in got["linear"].problem
    if absent("regex"):
        assert "cannot call regex.compile: the grader's environment does not have the module 'regex' (imported in " \
               "cs336_basics/tokenizer.py line 3)" in got["rms_norm"].problem
    if absent("wandb"):
        output = next(c for c in got["embedding_functional"].checks if c.id == "output_shape")
        assert "calling cs336_basics.logged:embedding_logged raised ModuleNotFoundError: cannot call wandb.log" \
            in output.message and "at cs336_basics/logged.py:7" in output.message
    notes = "\n".join(report.notes)
    assert "cs336_experiment_tracker is not installed in the grader's environment" in notes
    for name in ABSENT:
        assert (f"{name} is not installed in the grader's environment" in notes) == absent(name), notes


@pytest.mark.thorough
def test_batch_grades_a_cs336_repository_in_the_sandbox(tmp_path):
    """The sandboxed worker gets the staged copy: metadata, data file and placeholders work there too."""
    from validator.batch.grade import grade_folder

    subs = tmp_path / "subs"
    shutil.copytree(IMPORTS, subs / "dana")
    out = tmp_path / "out"
    code = grade_folder(submissions=subs, out=out, challenges=["token_embedding", "linear"], workers=1, timeout=120,
                        stream=io.StringIO(), live=False)
    assert code == 0
    dana = json.loads((out / "dana.json").read_text())
    embedding, linear = dana["challenges"]
    assert {c["status"] for c in embedding["checks"] if c["kind"] not in ("question",)} <= {"passed", "advisory"}
    if sys.version_info < (3, 12):
        assert "uses syntax this grader's Python" in linear["problem"]
    assert any("cs336_experiment_tracker is not installed" in n for n in dana["notes"])


def test_an_import_whose_case_differs_from_the_file_names_the_file(tmp_path):
    """``from pkg.RoPEModule.RoPE import ...`` where the file is ``RoPEModule/Rope.py`` (seen in a real repository):
    it works on macOS, whose disks usually ignore case, and failed here with a bare ModuleNotFoundError on every
    check. The error now names the file that is there."""
    from validator.worker.imports import StagedPackage

    (tmp_path / "casepkg" / "RoPEModule").mkdir(parents=True)
    (tmp_path / "casepkg" / "__init__.py").write_text("")
    (tmp_path / "casepkg" / "RoPEModule" / "__init__.py").write_text("")
    (tmp_path / "casepkg" / "RoPEModule" / "Rope.py").write_text("VALUE = 1\n")
    (tmp_path / "casepkg" / "user.py").write_text("from casepkg.RoPEModule.RoPE import VALUE\n")
    (tmp_path / "casepkg" / "typo.py").write_text("from casepkg.RoPEModule.Rotary import VALUE\n")
    importer = StagedPackage(tmp_path)
    importer.install()
    try:
        with pytest.raises(ModuleNotFoundError) as caught:
            importer.import_module("casepkg.user")
        message = str(caught.value)
        assert "No module named 'casepkg.RoPEModule.RoPE'" in message, message
        assert "'RoPE' is asked for, 'Rope.py' is there" in message and "Linux" in message, message
        with pytest.raises(ModuleNotFoundError) as caught:  # a folder too, asked for directly
            importer.import_module("casepkg.ropemodule.Rope")
        assert "'ropemodule' is asked for, 'RoPEModule' is there" in str(caught.value), str(caught.value)
        with pytest.raises(ModuleNotFoundError) as caught:  # no file of another case: Python's error as it is
            importer.import_module("casepkg.typo")
        assert "asked for" not in str(caught.value), str(caught.value)
        assert importer.import_module("casepkg.RoPEModule.Rope").VALUE == 1
    finally:
        importer.uninstall()


def test_a_compiled_extension_of_the_package_held_as_a_stub_gets_a_placeholder(tmp_path):
    """``from . import cpp_extensions`` in a package's __init__, where the submission holds cpp_extensions.pyi and C++
    sources built by the author's CMake (a real repository): Python said "cannot import name ... partially
    initialized module (most likely due to a circular import)" and every check scored 0. The grader builds no
    compiled code: the extension gets a placeholder, the layers that never use it import, and a note says why."""
    from validator.worker.imports import StagedPackage

    pkg = tmp_path / "extpkg"
    (pkg / "csrc").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import cpp_extensions\nfrom .layers import double\n")
    (pkg / "cpp_extensions.pyi").write_text("def hello() -> None: ...\n")
    (pkg / "csrc" / "ext.cpp").write_text("// built by CMake\n")
    (pkg / "layers.py").write_text("def double(x):\n    return 2 * x\n")
    (pkg / "tokenizer.py").write_text("from extpkg.cpp_extensions import hello\n\ndef run():\n    return hello()\n")
    (pkg / "guarded.py").write_text("try:\n    from . import fast\nexcept ImportError:\n    fast = None\n")
    (pkg / "fast.pyi").write_text("")
    importer = StagedPackage(tmp_path)
    importer.install()
    try:
        package = importer.import_module("extpkg")
        assert package.double(3) == 6
        assert importer.import_module("extpkg.guarded").fast is None  # the author's fallback runs
        tokenizer = importer.import_module("extpkg.tokenizer")
        with pytest.raises(ModuleNotFoundError, match="extpkg.cpp_extensions"):
            tokenizer.run()
        notes = " ".join(importer.notes())
        assert "extpkg.cpp_extensions is a compiled extension of your package" in notes, notes
        assert "extpkg/__init__.py line 1" in notes and "fast" not in notes, notes
        with pytest.raises(ModuleNotFoundError):  # a module that is not there at all: Python's error, as before
            importer.import_module("extpkg.nothing")
    finally:
        importer.uninstall()
