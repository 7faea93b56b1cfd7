"""A CS336-style repository graded as it is, through its own tests/adapters.py (issue 19, item 1).

tests/packages/cs336_adapters/ holds three repositories of our own, each correct and each in a shape
the contract's constructors cannot call: ``plain`` (the contract's layers under other names, loaded
with load_state_dict, ``module.forward`` called directly), ``fused`` (one fused QKV projection, a RoPE
module passed to the attention and block constructors, keyword-only arguments, weights passed to
constructors, ``.data =`` loading) and ``heads`` (sub-packages, one Linear per head, RoPE switched on
by a flag with keyword-only settings, attention as a module, RMSNorm in float32 for every input, and
adapters that build each module in the input's dtype and on its device, as many students' do).
Each must get every graded check of the nine challenges an adapter reaches, on every seed; each bug
planted in ``plain`` (BROKEN) must cost points in its own challenge, and only where it reaches.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from helpers import catalogue
from validator import adapters
from validator.adapter_runner import _common_prefix, locate
from validator.api import grade
from validator.package import is_package_root, load_package
from validator.spec import SpecError

REPOS = Path(__file__).resolve().parent / "packages" / "cs336_adapters"
NINE = ["token_embedding", "linear", "rms_norm", "swiglu", "rope", "softmax", "attention",
        "multihead_self_attention", "transformer_block"]
# What an adapter cannot show, and so is reported as not graded (never as failed): the constructor's
# signature is the student's own, and run_rmsnorm always passes eps; an adapter builds the layer, loads the
# weights and calls it in one function, so neither several calls on one instance, nor the constructor's random
# draws alone, nor a move or conversion of the built layer with .to() can be made through it.
NOT_GRADED = ({f"{c}/signature" for c in NINE} | {"rms_norm/default_eps"}
              | {f"{c}/calls_in_sequence" for c in NINE if c not in ("softmax", "attention")}
              | {"multihead_self_attention/calls_in_sequence_default_positions"}
              | {"rms_norm/leaves_random_stream", "rope/leaves_random_stream"}
              | {f"{c}/independent_weights" for c in ("swiglu", "multihead_self_attention", "transformer_block")}
              | {"rope/tables_move_with_module", "multihead_self_attention/rope_tables_move_with_module",
                 "transformer_block/tables_move_with_module", "transformer_block/float16_residual_stream"})
# ... and CS336's run_multihead_self_attention_with_rope leaves token_positions=None's meaning open, and its
# run_transformer_block takes (batch, sequence_length, d_model) inputs only.
NOT_GRADED |= {"multihead_self_attention/default_positions", "transformer_block/no_leading_dims",
               "transformer_block/other_leading_dims"}
SEEDS = range(int(os.environ.get("VALIDATOR_TEST_SEEDS", "1")))


def graded(root: Path, challenges: list[str], seed: int = 0, profile: str = "default", checks=None):
    pkg = load_package(root, catalogue())
    return grade(root, package=pkg, challenges=challenges, seed=seed, profile=profile, checks=checks,
                 catalogue=catalogue())


def verdicts(report) -> dict[str, str]:
    return {f"{ch.id}/{c.id}": c.status for ch in report.challenges for c in ch.checks if c.kind != "question"}


def planted(tmp_path: Path, repo: str, rel: str, old: str, new: str) -> Path:
    """A copy of one of the repositories with ``old`` replaced by ``new`` once in its file ``rel``."""
    root = tmp_path / f"{repo}{len(list(tmp_path.iterdir()))}"
    shutil.copytree(REPOS / repo, root)
    text = (root / rel).read_text()
    assert old in text, f"{old!r} is no longer in {rel}"
    (root / rel).write_text(text.replace(old, new, 1))
    return root


# -- finding the weights by value ------------------------------------------------------------------------
def test_locate_finds_weights_whole_transposed_fused_and_split():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 6, generator=g) for _ in range(3))
    w = torch.randn(3, 5, generator=g)
    params = {"qkv": torch.cat([q, k, v]), "wt": w.T.contiguous(), "h0": q[:2].clone(), "h1": q[2:].clone(),
              "bias": torch.zeros(3)}
    found = locate({"q": q, "k": k, "w": w}, params)
    assert {p for p, _, _ in found["k"]} == {"qkv"}
    [(name, idx, sel)] = found["w"]
    assert name == "wt" and torch.equal(params["wt"].reshape(-1)[idx], w.reshape(-1)[sel])
    assert {p for p, _, _ in found["q"]} <= {"qkv", "h0", "h1"}
    for piece in found["q"]:
        assert torch.equal(params[piece[0]].reshape(-1)[piece[1]], q.reshape(-1)[piece[2]])
    assert "x" not in locate({"x": torch.randn(2, 2, generator=g)}, params)  # not loaded: not found


def test_locate_keeps_a_weight_where_most_of_it_is_when_a_value_collides_elsewhere():
    g = torch.Generator().manual_seed(1)
    w, other = torch.randn(4, 5, generator=g), torch.randn(3, generator=g)
    other[1] = w[2, 3]  # random floats do collide now and then
    found = locate({"w": w}, {"a_other": other, "b_home": w.clone()})  # the colliding parameter comes first
    [(name, idx, sel)] = found["w"]
    assert name == "b_home" and torch.equal(idx, sel)


def test_locate_places_a_repeated_value_where_its_neighbours_are():
    """Random float32 weights repeat a value now and then (a 2,400-element table one time in several): each copy must
    be placed where the layout puts it, or a gradient is read from the other copy's place. Whole, transposed, fused,
    split per head (the copies in different parameters), and two copies side by side."""
    from validator.adapter_runner import _gather

    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        w = torch.randn(6, 5, generator=g)
        w[4, 3], w[0, 0], w[2, 2] = w[1, 2], w[5, 4], w[2, 3]
        grad = torch.arange(30.0).reshape(6, 5)
        layouts = {
            "whole": ({"p": w.clone()}, {"p": grad}),
            "transposed": ({"p": w.T.contiguous()}, {"p": grad.T.contiguous()}),
            "fused": ({"p": torch.cat([torch.randn(6, 5, generator=g), w])}, {"p": torch.cat([torch.zeros(6, 5), grad])}),
            "heads": ({"h0": w[:3].clone(), "h1": w[3:].clone()}, {"h0": grad[:3], "h1": grad[3:]}),
            "heads_transposed": ({"h0": w[:3].T.contiguous(), "h1": w[3:].T.contiguous()},
                                 {"h0": grad[:3].T.contiguous(), "h1": grad[3:].T.contiguous()}),
        }
        for layout, (params, grads) in layouts.items():
            got = _gather(locate({"w": w}, params), grads, {"w": (6, 5)})["w"]
            assert torch.equal(got, grad), (seed, layout)


def test_locate_compares_in_the_parameters_dtype():
    w = torch.randn(3, 3, dtype=torch.float64)
    found = locate({"w": w}, {"p": w.float()})
    assert [p for p, _, _ in found["w"]] == ["p"]


def test_common_module_prefix():
    assert _common_prefix([["attn", "qkv"], ["attn", "out"]]) == ["attn"]
    assert _common_prefix([["attn", "heads", "0", "q"], ["attn", "heads", "1", "q"], ["attn", "o"]]) == ["attn"]
    assert _common_prefix([["norm1"]]) == ["norm1"]
    assert _common_prefix([["a"], ["b"]]) == []


# -- finding the adapters ----------------------------------------------------------------------------------
def test_stubs_are_told_from_filled_in_adapters():
    source = b'''
def run_linear(d_in, d_out, weights, in_features):
    """Docstring."""
    raise NotImplementedError

def run_embedding(vocab_size, d_model, weights, token_ids):
    raise NotImplementedError("todo")

def run_rmsnorm(d_model, eps, weights, in_features):
    norm = RMSNorm(d_model, eps)
    return norm(in_features)
'''
    found = adapters.adapter_functions(source)
    assert found["run_linear"].stub and found["run_embedding"].stub and not found["run_rmsnorm"].stub
    reached, stubbed = adapters.reach(found, catalogue())
    assert list(reached) == ["rms_norm"]
    assert "NotImplementedError" in stubbed["linear"]["Linear"] and "fill it in" in stubbed["linear"]["Linear"]
    assert adapters.adapter_functions(b"def broken(:\n") is None


def test_a_repository_with_adapters_is_a_package_root(tmp_path):
    assert is_package_root(REPOS / "plain")
    (tmp_path / "tests").mkdir()
    assert not is_package_root(tmp_path)
    (tmp_path / "tests" / "adapters.py").write_text("def run_softmax(in_features, dim):\n    return in_features\n")
    assert is_package_root(tmp_path)
    pkg = load_package(tmp_path, catalogue())
    assert pkg.mapped_challenges(list(catalogue())) == ["softmax"]
    target = pkg.target("softmax", "softmax")
    assert target.adapter is not None and target.label == "tests.adapters:run_softmax"


def test_a_map_line_wins_over_an_adapter_and_unfilled_adapters_say_so(tmp_path):
    root = tmp_path / "repo"
    (root / "tests").mkdir(parents=True)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "layers.py").write_text("def sm(x, dim):\n    return x.softmax(dim)\n")
    (root / "tests" / "adapters.py").write_text(
        "def run_softmax(in_features, dim):\n    raise NotImplementedError\n\n"
        "def run_linear(d_in, d_out, weights, in_features):\n    raise NotImplementedError\n")
    (root / "pyproject.toml").write_text('[tool.validator.map]\n"softmax.softmax" = "pkg.layers:sm"\n')
    pkg = load_package(root, catalogue())
    assert pkg.target("softmax", "softmax").adapter is None  # the stub is not used: the map line is
    assert "NotImplementedError" in pkg.unmapped["linear"]["Linear"]
    (root / "tests" / "adapters.py").write_text("def run_softmax(in_features, dim):\n    return in_features\n")
    pkg = load_package(root, catalogue())  # implemented now: the map line, said on purpose, still wins
    assert pkg.target("softmax", "softmax").label == "pkg.layers:sm"
    assert any("[tool.validator.map] lines, not tests/adapters.py, for softmax.softmax" in n for n in pkg.notes)


def test_a_repository_whose_adapters_are_all_stubs_is_told_to_fill_them_in(tmp_path, capsys):
    from validator.cli import main as cli_main

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "adapters.py").write_text(
        "def run_softmax(in_features, dim):\n    \"\"\"Doc.\"\"\"\n    raise NotImplementedError\n")
    assert cli_main(["submit-build", "--student", str(tmp_path), "--no-input"]) == 2
    err = capsys.readouterr().err
    assert "adapters.py: every adapter the challenges call still raises NotImplementedError" in err
    assert "run_* functions of softmax" in err


def test_a_partly_filled_repository_is_graded_and_told_what_it_leaves_out(tmp_path, capsys):
    """A repository part-way through the assignment: the filled-in adapters are graded, and the report says which
    challenges were left out because their run_* functions are still the course's stubs."""
    from validator.cli import main as cli_main

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "adapters.py").write_text(
        "import torch\n\n"
        "def run_softmax(in_features, dim):\n"
        "    e = torch.exp(in_features - in_features.amax(dim=dim, keepdim=True))\n"
        "    return e / e.sum(dim=dim, keepdim=True)\n\n"
        "def run_linear(d_in, d_out, weights, in_features):\n    raise NotImplementedError\n")
    cli_main(["submit-build", "--student", str(tmp_path), "--no-input", "--check", "matches_reference"])
    out = capsys.readouterr().out
    assert "not graded yet: linear, whose run_* functions in tests/adapters.py still raise NotImplementedError" in out


def test_an_adapter_argument_must_name_what_the_entry_has(tmp_path):
    spec = (Path(__file__).resolve().parents[1] / "challenges" / "linear.yaml").read_text()
    bad = spec.replace("weights: {param: weight}", "weights: {param: bias}")
    assert bad != spec
    (tmp_path / "linear.yaml").write_text(bad)
    from validator.spec import load_challenge
    with pytest.raises(SpecError, match=r"argument 'weights' takes param 'bias'.*its params: weight"):
        load_challenge(tmp_path / "linear.yaml")


# -- grading through the adapters ----------------------------------------------------------------------------
def test_linear_through_a_plain_adapter():
    """The default tier's representative: structure, values, gradients, init and device, through run_linear."""
    report = graded(REPOS / "plain", ["linear"], checks=["parameters", "signature", "meta_device", "matches_reference",
                                                         "gradients", "init_distribution"], profile="quick")
    got = verdicts(report)
    assert got == {"linear/parameters": "passed", "linear/signature": "skipped", "linear/meta_device": "passed",
                   "linear/matches_reference": "passed", "linear/gradients": "passed",
                   "linear/init_distribution": "passed"}, report.challenges[0].checks
    [ch] = report.challenges
    signature = next(c for c in ch.checks if c.id == "signature")
    assert signature.max_score == 0 and "not graded through tests/adapters.py" in signature.message
    assert ch.implementations == {"Linear": "tests.adapters:run_linear (tests/adapters.py)"}


@pytest.mark.thorough
def test_the_bug_class_checks_through_an_adapter(tmp_path):
    """Inputs left unchanged and inputs as views are graded through run_linear (the runner's own input building,
    in-place edits seen through the adapter); a sequence of calls on one instance is not graded, and says why."""
    checks = ["input_unchanged", "input_views", "calls_in_sequence"]
    report = graded(REPOS / "plain", ["linear"], checks=checks, profile="quick")
    [ch] = report.challenges
    assert verdicts(report) == {"linear/input_unchanged": "passed", "linear/input_views": "passed",
                                "linear/calls_in_sequence": "skipped"}, ch.checks
    sequence = next(c for c in ch.checks if c.id == "calls_in_sequence")
    assert "run_linear builds a fresh layer on every call" in sequence.message
    root = tmp_path / "repo"
    shutil.copytree(REPOS / "plain", root)
    layers = root / "cs336_basics" / "layers.py"
    text = layers.read_text()
    assert "        return x @ self.W.T\n" in text
    in_place = ("        if not torch.is_grad_enabled():  # 'saves memory' at inference: the caller's x is overwritten\n"
                "            return x.mul_(1.5) @ self.W.T / 1.5\n"
                "        return x @ self.W.T\n")
    layers.write_text(text.replace("        return x @ self.W.T\n", in_place, 1))
    got = verdicts(graded(root, ["linear"], checks=checks[:2], profile="quick"))
    assert got == {"linear/input_unchanged": "failed", "linear/input_views": "passed"}, got


@pytest.mark.thorough
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("repo", ["plain", "fused", "heads"])
def test_correct_repositories_get_every_graded_check(repo, seed):
    report = graded(REPOS / repo, NINE, seed=seed)
    got = verdicts(report)
    not_graded = {k for k, v in got.items() if v == "skipped"}
    wrong = {k: v for k, v in got.items() if v not in ("passed", "skipped", "advisory")}
    messages = {f"{ch.id}/{c.id}": c.message for ch in report.challenges for c in ch.checks}
    assert not wrong, {k: messages[k][:400] for k in wrong}
    assert not_graded == NOT_GRADED, not_graded ^ NOT_GRADED
    assert report.review == []
    assert [ch.id for ch in report.challenges] == NINE


# Bugs planted in `plain`, each in one layer: (file, old, new, the challenge it is in, where it may reach).
BLOCK_PARTS = {"transformer_block"}
BROKEN = {
    "linear_not_transposed": ("cs336_basics/layers.py", "return x @ self.W.T", "return x @ self.W",
                              "linear", {"swiglu", "multihead_self_attention"} | BLOCK_PARTS),
    "rmsnorm_eps_outside_sqrt": ("cs336_basics/layers.py", "torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)",
                                 "torch.sqrt(x.pow(2).mean(-1, keepdim=True)) + self.eps", "rms_norm", BLOCK_PARTS),
    "softmax_without_max": ("cs336_basics/layers.py", "torch.exp(wide - wide.amax(dim=dim, keepdim=True))",
                            "torch.exp(wide)", "softmax", {"attention", "multihead_self_attention"} | BLOCK_PARTS),
    "attention_not_causal": ("cs336_basics/layers.py", "torch.ones(n, n, dtype=torch.bool, device=x.device).tril()",
                             "torch.ones(n, n, dtype=torch.bool, device=x.device)", "multihead_self_attention",
                             BLOCK_PARTS),
    "block_post_norm": ("cs336_basics/layers.py", "x = x + self.attn(self.ln1(x))", "x = self.ln1(x + self.attn(x))",
                        "transformer_block", set()),
    "rope_rotates_halves": ("cs336_basics/layers.py", "a, b = work[..., 0::2], work[..., 1::2]",
                            "a, b = work[..., : work.shape[-1] // 2], work[..., work.shape[-1] // 2:]", "rope",
                            {"multihead_self_attention"} | BLOCK_PARTS),
    "silu_is_sigmoid": ("cs336_basics/layers.py", "return x * torch.sigmoid(x)", "return torch.sigmoid(x)", "swiglu",
                        BLOCK_PARTS),
    "embedding_clamps_ids": ("cs336_basics/layers.py", "return self.table[token_ids]",
                             "return self.table[token_ids.clamp(0, self.table.shape[0] - 1)]", "token_embedding",
                             set()),
    "adapter_swaps_w1_w3": ("tests/adapters.py", '{"w1.W": w1_weight, "w2.W": w2_weight, "w3.W": w3_weight}',
                            '{"w1.W": w3_weight, "w2.W": w2_weight, "w3.W": w1_weight}', "swiglu", set()),
}


@pytest.mark.thorough
@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_each_bug_costs_its_own_challenge_and_only_where_it_reaches(bug, tmp_path):
    rel, old, new, owner, reaches = BROKEN[bug]
    root = tmp_path / "repo"
    shutil.copytree(REPOS / "plain", root)
    text = (root / rel).read_text()
    assert old in text, f"{old!r} is no longer in {rel}"
    (root / rel).write_text(text.replace(old, new, 1))
    report = graded(root, NINE, seed=1, profile="batch")  # what official grading runs
    lost = {ch.id for ch in report.challenges if any(c.score < c.max_score for c in ch.checks if c.kind != "question")}
    assert owner in lost, verdicts(report)
    assert lost <= {owner} | reaches, {k: v for k, v in verdicts(report).items() if v not in ("passed", "skipped")}
    if owner != "transformer_block" and "transformer_block" in lost:  # a sublayer's bug is not the block's wiring
        block = verdicts(report)
        assert block["transformer_block/wiring"] == "passed" and block["transformer_block/wiring_gradient"] == "passed"


# -- the deployment paths ------------------------------------------------------------------------------------
@pytest.mark.thorough
def test_batch_grading_and_the_gradescope_bundle_grade_a_repository_through_its_adapters(tmp_path):
    """The whole repository uploaded to Gradescope (and graded by `validator grade` inside): its adapters are used,
    as by submit-build, with the sandbox's limits and the canary; every graded check of linear passes."""
    import json
    import subprocess

    from test_autograder import sandboxed
    from test_release import clean_env, dependencies_only_python, gradescope_layout
    from validator.instructor.release import build_autograder

    if not sandboxed():
        pytest.skip("the bundle refuses to grade without the full sandbox (root, namespaces, setuid)")
    bundle = tmp_path / "bundle"
    build_autograder(bundle, challenges=["linear"])
    ag = tmp_path / "autograder"
    script = gradescope_layout(bundle.with_name("bundle.zip"), ag)
    shutil.copytree(REPOS / "plain", ag / "submission" / "assignment1-basics")  # uploaded as a folder
    done = subprocess.run(["bash", str(script)], env=clean_env(AUTOGRADER_ROOT=str(ag),
                                                               PYTHON=str(dependencies_only_python(tmp_path))),
                          capture_output=True, text=True, timeout=900, cwd=str(ag))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((ag / "results" / "results.json").read_text())
    code = [t for t in results["tests"] if "question" not in t["name"]]
    assert code and all(t["score"] == t["max_score"] for t in code), [t for t in code if t["score"] < t["max_score"]]
    assert any("signature" in t["name"] and t["max_score"] == 0 for t in code), code


@pytest.mark.thorough
def test_the_pytest_plugin_grades_a_repository_through_its_adapters(tmp_path):
    """pytest --validator in a CS336 repository with no pyproject.toml: items are collected under tests/adapters.py,
    and the repository's own `tests` package, which pytest imports, does not shadow the staged one in the worker."""
    import subprocess
    import sys

    from test_release import clean_env

    root = tmp_path / "assignment1-basics"
    shutil.copytree(REPOS / "plain", root)
    (root / "pyproject.toml").unlink()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--validator",
                           "--validator-student", ".", "--validator-challenge", "softmax", "-k", "not question",
                           "-q"], cwd=root, env=clean_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "passed" in done.stdout and "1 skipped" in done.stdout, done.stdout  # the signature: not graded


def test_a_tests_namespace_package_the_grader_imported_does_not_hide_the_repositorys(tmp_path):
    """The worker is forked from the grader's process. Where that process had imported a ``tests`` namespace
    package of another folder (a test session's ``from tests.x import y``, a course's own tooling), the
    repository's ``tests.adapters`` must still be found: each check ran "not run: see the problem above" in a
    test session that had imported the project's own tests that way."""
    import importlib
    import sys

    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "tests").mkdir(parents=True)  # no __init__.py: a namespace package, as pytest's rootdir tests
    (elsewhere / "tests" / "helper_mod.py").write_text("X = 1\n")
    saved = {name: mod for name, mod in sys.modules.items() if name == "tests" or name.startswith("tests.")}
    for name in saved:
        del sys.modules[name]
    sys.path.insert(0, str(elsewhere))
    try:
        importlib.import_module("tests.helper_mod")
        assert sys.modules["tests"].__file__ is None  # the stale namespace package, now in this process
        root = Path(__file__).parent / "packages" / "cs336_adapters" / "plain"
        report = grade(root, package=load_package(root, catalogue()), challenges=["linear"], seed=11,
                       profile="batch", answers={}, catalogue=catalogue())
    finally:
        sys.path.remove(str(elsewhere))
        for name in [n for n in sys.modules if n == "tests" or n.startswith("tests.")]:
            del sys.modules[name]
        sys.modules.update(saved)
    linear = report.challenges[0]
    assert linear.problem is None, linear.problem
    assert all(c.status in ("passed", "skipped") for c in linear.checks if c.kind != "question")


def test_an_adapters_own_dtype_is_left_out_where_the_contract_builds_without_one(tmp_path):
    """``heads``' adapters build in the input's dtype (``dtype=in_features.dtype``, as many students' do). A check that
    builds without ``dtype=`` builds as the contract does: the default-dtype check sees the constructor's own default,
    and a bfloat16 input meets float32 weights. A default hard-coded to float32 is still caught through the same
    adapter, by that check alone; a constructor with no default for dtype is built in the default dtype, so that the
    default-dtype check alone cannot be made (and says why)."""
    checks = ["default_dtype", "bf16_accuracy"]
    got = verdicts(graded(REPOS / "heads", ["rms_norm", "multihead_self_attention"], checks=checks, profile="quick"))
    assert got == {"rms_norm/default_dtype": "passed", "rms_norm/bf16_accuracy": "passed",
                   "multihead_self_attention/default_dtype": "passed"}, got

    norm_init = "    def __init__(self, d, eps=1e-5, device=None, dtype=None):\n"
    block, basic = "cs336_basics/model/block.py", "cs336_basics/model/basic.py"
    hard_coded = planted(tmp_path, "heads", block, norm_init, norm_init.replace("dtype=None", "dtype=torch.float32"))
    report = graded(hard_coded, ["rms_norm"], checks=checks, profile="quick")
    assert verdicts(report) == {"rms_norm/default_dtype": "failed", "rms_norm/bf16_accuracy": "passed"}
    message = next(c.message for c in report.challenges[0].checks if c.id == "default_dtype")
    assert "expected float64" in message and "`weight` is float32" in message, message

    # `dtype or torch.float32` costs the default-dtype check only: a float64 gradient check keeps the adapter's
    # dtype=in_features.dtype, which is the default dtype there, so the bug is not charged again as an error
    ignores_none = planted(tmp_path, "heads", basic, "torch.empty(fan_out, fan_in, device=device, dtype=dtype)",
                           "torch.empty(fan_out, fan_in, device=device, dtype=dtype or torch.float32)")
    got = verdicts(graded(ignores_none, ["linear"], checks=["default_dtype", "gradients"], profile="quick"))
    assert got == {"linear/default_dtype": "failed", "linear/gradients": "passed"}, got
    # ... and an adapter that passes the weights' dtype, the default dtype there, does not hide it from that check
    table = planted(tmp_path, "heads", basic, "torch.empty(vocab, dim, device=device, dtype=dtype)",
                    "torch.empty(vocab, dim, device=device, dtype=dtype or torch.float32)")
    got = verdicts(graded(table, ["token_embedding"], checks=["default_dtype"], profile="quick"))
    assert got == {"token_embedding/default_dtype": "failed"}, got

    required = planted(tmp_path, "heads", block, norm_init,
                       norm_init.replace("eps=1e-5, device=None, dtype=None", "eps, device, dtype"))
    report = graded(required, ["rms_norm"], checks=checks, profile="quick")
    assert verdicts(report) == {"rms_norm/default_dtype": "skipped", "rms_norm/bf16_accuracy": "passed"}
    message = next(c.message for c in report.challenges[0].checks if c.id == "default_dtype")
    assert "run_rmsnorm passes dtype= to Norm, whose constructor has no default for it" in message, message


def test_an_adapter_that_calls_the_layer_under_no_grad_still_has_its_gradients_graded(tmp_path):
    """The course's snapshot tests need values only, so an adapter may call the layer under torch.no_grad(): the
    grader still runs the layer's forward with gradients on where a check grades them (a layer that detaches its
    output still fails)."""
    call = '    return _load(linear, {"weight": weights})(in_features)\n'
    root = planted(tmp_path, "heads", "tests/adapters.py", call, "    with torch.no_grad():\n    " + call)
    checks = ["gradients", "matches_reference"]
    got = verdicts(graded(root, ["linear"], checks=checks, profile="quick"))
    assert got == {"linear/gradients": "passed", "linear/matches_reference": "passed"}, got
    basic = root / "cs336_basics" / "model" / "basic.py"
    text = basic.read_text()
    old = "        return x @ self.weight.transpose(-1, -2)\n"
    assert old in text
    basic.write_text(text.replace(old, "        return (x @ self.weight.transpose(-1, -2)).detach()\n"))
    got = verdicts(graded(root, ["linear"], checks=checks, profile="quick"))
    assert got == {"linear/gradients": "failed", "linear/matches_reference": "passed"}, got


def test_a_block_whose_constructor_takes_no_device_is_not_graded_on_it_though_its_rope_module_is(tmp_path):
    """``fused`` builds a RoPE module and hands it to the block (as cs336_adapters.md shows students do). Where the
    block's constructor takes no device= or dtype= but the RoPE's takes device=, the device check cannot be made
    through the adapter: it is not graded, and says so, rather than failed for the block's parameters on the CPU."""
    root = planted(tmp_path, "fused", "cs336_basics/nn.py",
                   "    def __init__(self, d_model, num_heads, d_ff, *, rope, device=None, dtype=None):\n",
                   "    def __init__(self, d_model, num_heads, d_ff, *, rope):\n        device = dtype = None\n")
    report = graded(root, ["transformer_block"], checks=["meta_device", "honours_dtype"], profile="quick")
    assert verdicts(report) == {"transformer_block/meta_device": "skipped",
                                "transformer_block/honours_dtype": "skipped"}, report.challenges[0].checks
    message = next(c.message for c in report.challenges[0].checks if c.id == "meta_device")
    assert "run_transformer_block builds Block, whose constructor takes no device= argument" in message, message


def test_a_parameter_the_adapter_replaces_with_data_is_judged_in_the_shape_the_constructor_made(tmp_path):
    """``fused`` loads the block's weights with ``.data =``, which replaces a parameter whatever its shape: a SwiGLU
    that ignores d_ff (seen in a real repository) must still fail the shapes check, in the shape it built."""
    old = "        weights = weights or {}\n"
    root = planted(tmp_path, "fused", "cs336_basics/nn.py", old, old + "        d_ff = 4 * d_model  # ignores d_ff\n")
    report = graded(root, ["transformer_block"], checks=["parameters"], profile="quick")
    [check] = report.challenges[0].checks
    assert check.status == "failed", check
    assert "ffn.w1.weight" in check.message, check.message


def test_an_adapter_that_computes_the_output_itself_has_no_layer_to_inspect(tmp_path):
    """An adapter that writes the computation itself instead of building the student's module gets its values
    graded (they are the adapter's own code) but has no layer for the parameter checks, and is told to build
    and call the layer, not that it built a library one."""
    root = planted(tmp_path, "plain", "tests/adapters.py",
                   '    norm = layers.RMSNorm(d_model, eps)\n    norm.load_state_dict({"g": weights})\n'
                   '    return norm(in_features)\n',
                   "    x = in_features.float()\n    rms = x.pow(2).mean(-1, keepdim=True).add(eps).rsqrt()\n"
                   "    return (x * rms * weights).to(in_features.dtype)\n")
    report = graded(root, ["rms_norm"], checks=["matches_reference", "parameters"], profile="quick")
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    assert checks["parameters"].status == "failed", checks["parameters"]  # a verdict on the missing module
    message = checks["parameters"].message
    assert "run_rmsnorm built no module of your package" in message and "must build your layer" in message, message
    assert "computed by a function (the adapter's own code or a function of your package)" in message, message


PLAIN_BLOCK = '''class TransformerBlock:  # a plain class that holds modules: no nn.Module
    def load_state_dict(self, state):
        for name in ("ln1", "attn", "ln2", "ffn"):
            getattr(self, name).load_state_dict({k.split(".", 1)[1]: v for k, v in state.items()
                                                 if k.startswith(name + ".")})

    def __call__(self, x):
        return self.forward(x)

    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
'''


def test_a_block_that_is_a_plain_class_is_told_so_and_its_computation_is_graded(tmp_path):
    """A ``TransformerBlock`` written as a plain class (seen in a real repository) calls its sublayers' forwards
    itself. The grader took the first of them, an RMSNorm, for the layer: "8 parameters", and the dtype and
    device checks passed, judged on that RMSNorm. No module is the layer: the checks of its structure fail
    and say what to change, the stand-in checks cannot be made, and its values and gradients are graded."""
    root = planted(tmp_path, "plain", "cs336_basics/layers.py",
                   "class TransformerBlock(nn.Module):\n"
                   "    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):\n"
                   "        super().__init__()\n", PLAIN_BLOCK)
    structure = ["parameters", "parameter_count", "meta_device", "honours_dtype", "default_dtype"]
    report = graded(root, ["transformer_block"], profile="quick",
                    checks=structure + ["matches_reference", "gradient", "wiring"])
    checks = {c.id: c for c in report.challenges[0].checks}
    for name in structure:
        assert checks[name].status == "failed", (name, checks[name].message)
        assert "`TransformerBlock` is not an nn.Module" in checks[name].message, checks[name].message
        assert "ran the forward of RMSNorm" in checks[name].message, checks[name].message
    assert checks["wiring"].status == "skipped", checks["wiring"]
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    assert checks["gradient"].status == "passed", checks["gradient"].message  # read from the sublayers


FUNCTIONAL_MHA = '''

def attention_with_rope(d_model, num_heads, max_seq_len, theta, wq, wk, wv, wo, x, token_positions=None):
    """Multi-head attention as a function of its weights, with a RoPE module built on the way."""
    *lead, n, d = x.shape
    split = lambda t: t.reshape(*lead, n, num_heads, d // num_heads).transpose(-3, -2)  # noqa: E731
    q, k, v = split(x @ wq.T), split(x @ wk.T), split(x @ wv.T)
    if theta is not None:
        rope = RotaryPositionalEmbedding(theta, d // num_heads, max_seq_len)
        if token_positions is None:
            token_positions = torch.arange(n, device=x.device)
        q, k = rope(q, token_positions.unsqueeze(-2)), rope(k, token_positions.unsqueeze(-2))
    mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
    out = scaled_dot_product_attention(q, k, v, mask)
    return out.transpose(-3, -2).reshape(*lead, n, d) @ wo.T
'''


def test_attention_written_as_a_function_is_told_so_and_its_traced_runs_are_graded(tmp_path):
    """Attention written as a function of its weights that builds a RoPE module and calls it (seen in a real
    repository): the RoPE module was taken for the layer ("0 parameters"), and the op-count and library checks,
    which count from the layer's forward, errored. No module is the layer: the structure checks fail saying it
    is a function, and the whole call is traced and graded, its gradients read from the weights it was given."""
    root = planted(tmp_path, "plain", "tests/adapters.py",
                   '    mha = layers.MultiHeadSelfAttention(d_model, num_heads, max_seq_len, theta)\n'
                   '    mha.load_state_dict({"q_proj.W": q_proj_weight, "k_proj.W": k_proj_weight, '
                   '"v_proj.W": v_proj_weight,\n'
                   '                         "output_proj.W": o_proj_weight})\n'
                   '    return mha(in_features, token_positions)\n',
                   '    return layers.attention_with_rope(d_model, num_heads, max_seq_len, theta, q_proj_weight, '
                   'k_proj_weight, v_proj_weight, o_proj_weight, in_features, token_positions)\n')
    with open(root / "cs336_basics" / "layers.py", "a") as f:
        f.write(FUNCTIONAL_MHA)
    adapters_py = root / "tests" / "adapters.py"
    without_rope = ('    mha = layers.MultiHeadSelfAttention(d_model, num_heads)\n'
                    '    mha.load_state_dict({"q_proj.W": q_proj_weight, "k_proj.W": k_proj_weight, '
                    '"v_proj.W": v_proj_weight,\n'
                    '                         "output_proj.W": o_proj_weight})\n'
                    '    return mha(in_features)\n')
    assert without_rope in adapters_py.read_text()
    adapters_py.write_text(adapters_py.read_text().replace(without_rope, (
        '    return layers.attention_with_rope(d_model, num_heads, None, None, q_proj_weight, k_proj_weight, '
        'v_proj_weight, o_proj_weight, in_features)\n')))
    traced = ["no_library_runtime", "vectorised", "no_library_linear_runtime"]
    report = graded(root, ["multihead_self_attention"], profile="quick",
                    checks=["rope_adds_no_parameters", "default_dtype", "with_rope", "gradient"] + traced)
    checks = {c.id: c for c in report.challenges[0].checks}
    message = checks["rope_adds_no_parameters"].message
    assert checks["rope_adds_no_parameters"].status == "failed", checks["rope_adds_no_parameters"]
    assert "`attention_with_rope` is a function" in message and "RotaryPositionalEmbedding" in message, message
    # without RoPE it builds no module at all; the default-dtype check once reported the crash of its float32
    # inputs meeting the float64 weights that check makes
    assert checks["default_dtype"].status == "failed", checks["default_dtype"]
    assert "run_multihead_self_attention built no module" in checks["default_dtype"].message
    for name in ["with_rope", "gradient"] + traced:
        assert checks[name].status == "passed", (name, checks[name].message)


def test_a_layer_that_is_no_module_has_its_whole_call_counted_but_no_constructor(tmp_path):
    """Where no module is the layer, its ops are the whole adapter call's, less what constructors of the package
    ran: a block written as a function that builds a SwiGLU on every call (seen in a real repository) drew its
    weights with trunc_normal_, whose op count is random (it draws again until the values fall inside), and failed
    the op-count check on one seed in four."""
    from validator import adapter_runner, runner

    class Built(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.nn.init.trunc_normal_(torch.empty(4, 4)))

    adapter_runner._instrument(Built)
    recorder = runner.OpRecorder()
    recorder.counting = False
    watch = adapter_runner.Watch(inject={}, construct_only=False, train=None, device=None, recorder=recorder)
    with recorder, adapter_runner._watching(watch):
        Built()
        torch.ones(3).mul(2.0)
    recorder.count_uncounted()
    assert recorder.counts == {"aten.ones": 1, "aten.mul": 1}, recorder.counts  # no empty, normal_, where...


FUNCTIONAL_ROPE = '''

def rope_fn(d_k, theta, max_seq_len, x, token_positions):
    """RoPE as a function: no module holds its tables."""
    freqs = theta ** (-torch.arange(0, d_k, 2, dtype=torch.float64) / d_k)
    angles = token_positions.to(torch.float64)[..., None] * freqs
    cos, sin = angles.cos().float(), angles.sin().float()
    work = x.to(torch.promote_types(x.dtype, cos.dtype))
    a, b = work[..., 0::2], work[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2).to(x.dtype)
'''


def test_rope_written_as_a_function_fails_the_module_checks_and_passes_the_output_ones(tmp_path):
    """RoPE written as a function (seen in a real repository): the checks that read the module's structure crashed
    the grader (KeyError: 'structure'), and the device check said "builds the layer it builds". They fail, saying
    no module was built; a dtype check about the output alone is graded on the output."""
    root = planted(tmp_path, "plain", "tests/adapters.py",
                   "    return layers.RotaryPositionalEmbedding(theta, d_k, max_seq_len)(in_query_or_key, "
                   "token_positions)",
                   "    return layers.rope_fn(d_k, theta, max_seq_len, in_query_or_key, token_positions)")
    with open(root / "cs336_basics" / "layers.py", "a") as f:
        f.write(FUNCTIONAL_ROPE)
    structure = ["no_parameters", "tables_not_in_state_dict", "meta_device"]
    report = graded(root, ["rope"], profile="quick", checks=structure + ["bf16_keeps_dtype", "matches_reference"])
    checks = {c.id: c for c in report.challenges[0].checks}
    for name in structure:
        assert checks[name].status == "failed", (name, checks[name].message)
        assert "run_rope built no module of your package" in checks[name].message, checks[name].message
    for name in ("bf16_keeps_dtype", "matches_reference"):
        assert checks[name].status == "passed", (name, checks[name].message)


def test_a_gain_the_adapter_stores_as_an_offset_is_not_read_under_another_name(tmp_path):
    """A layer may hold its gain as an offset from 1 (``weight = 1 + g``, as some codebases do), loaded by the
    adapter as ``weights - 1``: the test weights are then in no parameter. The grader matched the contract's
    ``weight`` to ``g`` by its shape, handed the adapter its weights under the name ``g`` (a KeyError in the
    worker: 0/34 for correct code). The adapter gets the contract's names; the checks that read the weights say
    why they cannot, and every other check, the traced runs included, is graded."""
    root = planted(tmp_path, "plain", "tests/adapters.py", 'norm.load_state_dict({"g": weights})',
                   'norm.load_state_dict({"g": weights - 1})')
    layer = root / "cs336_basics" / "layers.py"
    text = layer.read_text()
    for old, new in (("self.g = nn.Parameter(torch.ones(", "self.g = nn.Parameter(torch.zeros("),
                     ("return (x / rms * self.g).to(in_dtype)", "return (x / rms * (1 + self.g)).to(in_dtype)")):
        assert old in text
        text = text.replace(old, new)
    layer.write_text(text)
    report = graded(root, ["rms_norm"], profile="quick")
    checks = {c.id: c for c in report.challenges[0].checks if c.kind != "question"}
    unreadable = {"parameters", "gradients", "forward_keeps_weights", "gain_starts_at_one"}
    assert {i for i, c in checks.items() if c.status == "skipped"} == unreadable | (
        {i.split("/")[1] for i in NOT_GRADED if i.startswith("rms_norm/")}), checks
    assert all(c.status == "passed" for i, c in checks.items() if c.status != "skipped"), \
        {i: c.message for i, c in checks.items() if c.status not in ("passed", "skipped")}
    assert "'weight' that run_rmsnorm loads are not among the parameters" in checks["gradients"].message


def test_a_parameter_hard_coded_in_float32_costs_the_dtype_checks_not_the_float64_gradient_checks(tmp_path):
    """A constructor that makes its weight in float32 whatever it is asked (a real repository's, with an adapter that
    loads the weights with load_state_dict, which keeps the parameter's dtype) fails the default-dtype check. Through
    the layer's own file the grader converts the built parameters to the call's dtype before loading the test weights
    (runner._parameters_to), so the float64 gradient checks judge the gradients; through an adapter it did not, and
    each of them failed again on 'double != float'."""
    root = planted(tmp_path, "plain", "cs336_basics/layers.py",
                   "torch.empty(out_features, in_features, device=device, dtype=dtype)",
                   "torch.empty(out_features, in_features, device=device, dtype=torch.float32)")
    report = graded(root, ["linear"], checks=["gradients", "default_dtype", "matches_reference"], profile="quick")
    got = verdicts(report)
    assert got == {"linear/gradients": "passed", "linear/default_dtype": "failed",
                   "linear/matches_reference": "passed"}, report.challenges[0].checks


# attention computed inline, on weights the block holds itself
INLINE_ATTENTION_BLOCK = '''class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, d_ff, max_seq_len, theta, device=None, dtype=None):
        super().__init__()
        self.h = num_heads
        self.ln1 = RMSNorm(d_model, device=device, dtype=dtype)
        for name in ("wq", "wk", "wv", "wo"):
            setattr(self, name, nn.Parameter(torch.randn(d_model, d_model, device=device, dtype=dtype) / d_model))
        self.rope = RotaryPositionalEmbedding(theta, d_model // num_heads, max_seq_len, device=device)
        self.ln2 = RMSNorm(d_model, device=device, dtype=dtype)
        self.ffn = SwiGLU(d_model, d_ff, device=device, dtype=dtype)

    def forward(self, x):
        *lead, n, d = x.shape
        h = self.ln1(x)
        split = lambda t: t.reshape(*lead, n, self.h, d // self.h).transpose(-3, -2)  # noqa: E731
        q, k, v = split(h @ self.wq.T), split(h @ self.wk.T), split(h @ self.wv.T)
        positions = torch.arange(n, device=x.device).unsqueeze(-2)
        q, k = self.rope(q, positions), self.rope(k, positions)
        mask = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        x = x + scaled_dot_product_attention(q, k, v, mask).transpose(-3, -2).reshape(*lead, n, d) @ self.wo.T
        return x + self.ffn(self.ln2(x))


class _UnusedBlock(nn.Module):
'''


def test_a_block_that_computes_attention_inline_has_no_attention_to_stand_in_for(tmp_path):
    """A block that holds the attention weights itself and computes attention inline (seen in a real repository,
    whose attention is a function): the contract allows it, but no sublayer holds the attention weights, so the
    wiring checks, which replace the sublayers with the grader's stand-ins, cannot be made. They errored; they are
    not graded, and say why. The block's own values are graded."""
    root = planted(tmp_path, "plain", "cs336_basics/layers.py", "class TransformerBlock(nn.Module):\n",
                   INLINE_ATTENTION_BLOCK)
    adapters = root / "tests" / "adapters.py"
    old = "    block.load_state_dict(renamed)\n"
    text = adapters.read_text()
    assert old in text
    adapters.write_text(text.replace(old, (
        "    renamed = {k: v for k, v in renamed.items() if not k.startswith('attn.')}\n"
        "    renamed.update(wq=weights['attn.q_proj.weight'], wk=weights['attn.k_proj.weight'],\n"
        "                   wv=weights['attn.v_proj.weight'], wo=weights['attn.output_proj.weight'])\n" + old), 1))
    report = graded(root, ["transformer_block"], profile="quick",
                    checks=["matches_reference", "wiring", "wiring_gradient"])
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    for name in ("wiring", "wiring_gradient"):
        assert checks[name].status == "skipped" and checks[name].max_score == 0, (name, checks[name])
        assert "weights of attn are held by the module your adapter built itself" in checks[name].message, \
            checks[name].message


ROWS_IN_A_CONSTRUCTOR = '''

class _Rows(nn.Module):
    """The whole computation, one query position at a time (causal: its prefix is enough), in a constructor that
    calls no module's forward (a red-team probe)."""
    def __init__(self, mha, x, token_positions):
        super().__init__()
        *lead, n, d = x.shape
        split = lambda t: t.reshape(*t.shape[:-1], mha.h, d // mha.h).transpose(-3, -2)  # noqa: E731
        rope = RotaryPositionalEmbedding.forward.__wrapped__  # the unwatched forward: no forward window opens
        rows = []
        for t in range(n):
            q, k, v = (split(x[..., :t + 1, :] @ lin.W.T) for lin in (mha.q_proj, mha.k_proj, mha.v_proj))
            if mha.rope is not None:
                pos = (torch.arange(t + 1) if token_positions is None else token_positions[..., :t + 1]).unsqueeze(-2)
                q, k = rope(mha.rope, q, pos), rope(mha.rope, k, pos)
            mask = torch.ones(t + 1, t + 1, dtype=torch.bool).tril()
            out = scaled_dot_product_attention(q, k, v, mask).transpose(-3, -2).reshape(*lead, t + 1, d)
            rows.append(out[..., -1:, :] @ mha.output_proj.W.T)
        self.out = torch.cat(rows, dim=-2)


def rowwise(mha, x, token_positions=None):
    return _Rows(mha, x, token_positions).out
'''


def test_work_done_in_a_constructor_handed_the_input_is_counted_through_its_backward(tmp_path):
    """A red-team probe: ops in a constructor are left out of the op counts (an initialiser's draws are random in
    number), so a constructor handed the input could compute the output there, one position at a time, calling
    no module's forward. Its forward ops are not counted, but a measured run's gradients must be the
    reference's, so the work carries its autograd graph, and the backward, which is counted wherever its graph
    was built, grows with the sequence: ``vectorised`` fails."""
    root = planted(tmp_path, "plain", "cs336_basics/layers.py", "\n\nclass TransformerBlock(nn.Module):\n",
                   ROWS_IN_A_CONSTRUCTOR + "\n\nclass TransformerBlock(nn.Module):\n")
    adapters = root / "tests" / "adapters.py"
    text = adapters.read_text()
    for args in ("in_features, token_positions", "in_features"):  # with RoPE and without
        old = f"    return mha({args})\n"
        assert old in text
        text = text.replace(old, f"    return layers.rowwise(mha, {args})\n", 1)
    adapters.write_text(text)
    report = graded(root, ["multihead_self_attention"], profile="quick", checks=["matches_reference", "vectorised"])
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    assert checks["vectorised"].status == "failed", checks["vectorised"].message
    message = checks["vectorised"].message
    assert "one element (or one vocabulary row) at a time" in message, message


def test_an_embedding_written_as_a_function_is_measured_for_memory_over_the_whole_call(tmp_path):
    """An embedding written as a function that builds a one-hot matrix (tokens x vocabulary). A layer that is no
    module has no forward window, and memory is tracked in the built module's windows and in backward only; the
    one-hot is still caught there: the gradient of the weights multiplies by its transpose, which torch copies
    (11.9 MiB more at the larger vocabulary, against 0.2 MiB a weight-sized gradient explains)."""
    root = planted(tmp_path, "plain", "tests/adapters.py",
                   '    emb = layers.Embedding(vocab_size, d_model)\n    emb.load_state_dict({"table": weights})\n'
                   '    return emb(token_ids)\n',
                   "    one_hot = torch.nn.functional.one_hot(token_ids, vocab_size).to(weights.dtype)\n"
                   "    return one_hot @ weights\n")
    report = graded(root, ["token_embedding"], profile="quick",
                    checks=["matches_reference", "memory_independent_of_vocab"])
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    check = checks["memory_independent_of_vocab"]
    assert check.status == "failed", check.message
    assert "one-hot" in check.message, check.message


def test_positions_the_adapter_ignores_are_named_as_the_cause(tmp_path):
    """An adapter that calls the layer without the token_positions it is given (seen in two real repositories: the
    layer then uses 0 .. seq_len-1): the RoPE checks fail, and say that the output is the reference's at the
    default positions, so the given ones are ignored."""
    root = planted(tmp_path, "plain", "tests/adapters.py", "    return mha(in_features, token_positions)\n",
                   "    return mha(in_features)\n")
    report = graded(root, ["multihead_self_attention"], profile="quick",
                    checks=["matches_reference", "with_rope", "batched_positions"])
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["matches_reference"].status == "passed", checks["matches_reference"].message
    for name in ("with_rope", "batched_positions"):
        assert checks[name].status == "failed", (name, checks[name].message)
        assert "the token_positions passed in are ignored" in checks[name].message, checks[name].message


def test_an_adapter_whose_signature_lost_a_parameter_is_told_so_at_its_def_line(tmp_path):
    """An adapter with token_positions removed from its signature (seen in a real repository): the call itself
    raised TypeError, reported as "no line of your file is on the stack: raised inside PyTorch or Python", with a
    RoPE hint. It now says that the signature is not the handout's, at the adapter's def line."""
    indent = " " * 43
    root = planted(tmp_path, "plain", "tests/adapters.py",
                   f"{indent}v_proj_weight, o_proj_weight, in_features, token_positions=None):\n",
                   f"{indent}v_proj_weight, o_proj_weight, in_features):\n    token_positions = None\n")
    report = graded(root, ["multihead_self_attention"], profile="quick",
                    checks=["with_rope", "rope_adds_no_parameters"])
    check, structure = report.challenges[0].checks
    # a check that only builds the layer said "built no module of your package": it is the same error
    assert structure.status == "error" and "keep the handout's signature" in structure.message, structure.message
    assert check.status == "error", check
    assert "keep the handout's signature" in check.message and "token_positions" in check.message, check.message
    assert "tests/adapters.py:39 in run_multihead_self_attention_with_rope" in check.message, check.message
    assert "no line of your file" not in check.message, check.message


def test_a_package_that_does_not_import_is_graded_out_of_the_same_total(tmp_path):
    """A check that cannot be made through the adapters is worth 0 (not graded); where the package failed to import,
    every check became an error worth its points, so a broken package was graded out of more (305 against 275 in
    a real repository). It stays not graded."""
    root = planted(tmp_path, "plain", "cs336_basics/layers.py", "import math\n", "import math\nfrom . import gone\n")
    report = graded(root, ["multihead_self_attention"], profile="quick", checks=["with_rope", "default_positions"])
    checks = {c.id: c for c in report.challenges[0].checks}
    assert checks["with_rope"].status == "error", checks["with_rope"]
    assert checks["default_positions"].status == "skipped" and checks["default_positions"].max_score == 0, \
        checks["default_positions"]
    assert "not graded through tests/adapters.py" in checks["default_positions"].message
