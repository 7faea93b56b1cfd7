"""The check kinds and inputs added for the transformer challenges.

Mask inputs and shared leading dims, the `causal` and `relation` tests, the `state_dict`
test, and grader stand-ins (`stand_ins:`), which grade a composite layer's wiring apart from
its sublayers. The unit tests start no worker; the gradings (one mutant caught by the kind it
is for, the reference passing it) are in the thorough tier, apart from one representative.
"""

from __future__ import annotations

import textwrap

import pytest
import torch
from hypothesis import given, settings
from helpers import IMPLEMENTATIONS, ROOT, grade_file
from validator.cases import case_strategy, make_mask
from validator.runner import execute
from validator.spec import SpecError, load_challenge
from validator.standins import STAND_INS, CausalMeanAttention, ScaledTanhNorm, TanhGateFeedForward

REFERENCE = ROOT / "reference" / "layers.py"

SPEC = textwrap.dedent("""\
    id: seq
    title: Sequence
    entries:
      f: {kind: function, call: [Q, K, mask]}
    dims: {q: [1, 5], k: [1, 5], d: [1, 3]}
    inputs:
      Q: {type: float, shape: ["...", q, d]}
      K: {type: float, shape: ["...", k, d]}
      mask: {type: mask, pattern: random, shape: ["...", q, k]}
    checks:
{checks}
""")


def load(tmp_path, checks: str = "      - {id: a, kind: values, test: values, points: 1}", **replace):
    text = SPEC.replace("{checks}", checks)
    for old, new in replace.items():
        text = text.replace(old, new)
    path = tmp_path / "seq.yaml"
    path.write_text(text)
    return load_challenge(path)


# -- inputs ------------------------------------------------------------------------------------

def test_mask_patterns():
    gen = torch.Generator().manual_seed(0)
    causal = make_mask((2, 4, 4), "causal", gen)
    assert causal.dtype == torch.bool and torch.equal(causal[1], torch.ones(4, 4, dtype=torch.bool).tril())
    for _ in range(20):
        random_mask = make_mask((3, 5, 6), "random", gen)
        assert random_mask.any(dim=-1).all(), "every query may attend to at least one key"
        assert not random_mask.all(), "a random mask masks something"


def test_every_input_of_a_call_shares_the_drawn_leading_dims(tmp_path):
    challenge = load(tmp_path)
    entry = challenge.entries["f"]

    @settings(max_examples=30, database=None, deadline=None)
    @given(case_strategy(challenge, entry))
    def prop(case):
        q, k, mask = case.inputs["Q"], case.inputs["K"], case.inputs["mask"]
        lead = q.shape[:-2]
        assert k.shape[:-2] == lead and mask.shape[:-2] == lead
        assert mask.shape[-2:] == (case.dims["q"], case.dims["k"]) and mask.dtype == torch.bool
    prop()


def test_mask_needs_a_pattern_and_pattern_needs_a_mask(tmp_path):
    with pytest.raises(SpecError, match="pattern"):
        load(tmp_path, **{"pattern: random, ": ""})
    with pytest.raises(SpecError, match="pattern"):
        load(tmp_path, **{'Q: {type: float, shape': 'Q: {type: float, pattern: causal, shape'})


# -- spec validation of the new tests ----------------------------------------------------------

def test_causal_sequence_must_name_a_float_or_id_argument(tmp_path):
    bad = "      - {id: c, kind: values, test: causal, sequence: {mask: -1}, points: 1}"
    with pytest.raises(SpecError, match="only float and token_ids"):
        load(tmp_path, bad)
    missing = "      - {id: c, kind: values, test: causal, sequence: {V: -2}, points: 1}"
    with pytest.raises(SpecError, match="not an argument"):
        load(tmp_path, missing)
    load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2, K: -2}, regimes: [[q > 1]], points: 1}")
    # a lone position has nothing after it to change: a check that may draw only such cases is refused
    with pytest.raises(SpecError, match=r"regimes: a case with one position along Q's axis -2 \(q\)"):
        load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2, K: -2}, points: 1}")
    with pytest.raises(SpecError, match="could pass having checked nothing"):  # one regime of two pins it
        load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2}, regimes: [[q > k], [q < k]], points: 1}")
    load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2}, regimes: [[q > k], [q >= 2]], points: 1}")
    load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2}, dims: {q: 3}, points: 1}")


def test_a_call_sequence_varies_only_dims_of_the_inputs(tmp_path):
    """A dim the layer is built with cannot change between calls on one instance: varying it would test nothing."""
    module = {"f: {kind: function, call: [Q, K, mask]}": "f: {kind: module, init: [d], call: [Q, K, mask]}"}
    bad = "      - {id: s, kind: values, test: call_sequence, vary: [d], points: 1}"
    with pytest.raises(SpecError, match="built with 'd'"):
        load(tmp_path, bad, **module)
    load(tmp_path, "      - {id: s, kind: values, test: call_sequence, vary: [q, k], points: 1}", **module)


def test_relation_takes_one_transform_or_one_input(tmp_path):
    both = ("      - {id: r, kind: values, test: relation, against_input: Q,"
            " transform: {input: Q, scale: [2, 3]}, points: 1}")
    with pytest.raises(SpecError, match="exactly one of `transform` or `against_input`"):
        load(tmp_path, both)
    two_ways = "      - {id: r, kind: values, test: relation, transform: {input: Q, scale: [2, 3], shift: [1, 2]}, points: 1}"
    with pytest.raises(SpecError, match="exactly one of `shift"):
        load(tmp_path, two_ways)
    load(tmp_path, "      - {id: r, kind: values, test: relation, measure: norms, transform: {input: Q, scale: [2, 3]}, points: 1}")


def test_unknown_stand_in_is_a_spec_error(tmp_path):
    bad = "      - {id: w, kind: values, test: values, stand_ins: {RMSNorm: layer_norm}, points: 1}"
    with pytest.raises(SpecError, match="unknown stand-in 'layer_norm'"):
        load(tmp_path, bad)


def test_checks_of_the_layers_own_code_refuse_stand_ins(tmp_path):
    """inputs_unchanged and reduced_precision grade what the sublayers do too: a stand-in would hide it."""
    unchanged = "      - {id: u, kind: values, test: inputs_unchanged, stand_ins: {RMSNorm: scaled_tanh_norm}, points: 1}"
    with pytest.raises(SpecError, match="no stand-ins"):
        load(tmp_path, unchanged)
    precision = ("      - {id: p, kind: values, test: reduced_precision, convert: float16, stand_ins: {RMSNorm: "
                 "scaled_tanh_norm}, tolerance: {float16: {atol: 0.01, rtol: 0.01}}, points: 1}")
    with pytest.raises(SpecError, match="no `stand_ins`"):
        load(tmp_path, precision)


# -- stand-ins, in-process -----------------------------------------------------------------------

STUDENT = textwrap.dedent("""\
    import torch
    from torch import nn


    class Norm(nn.Module):
        def __init__(self, d, eps=1e-5, device=None, dtype=None):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


    Alias = Norm


    class Block(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln1 = Alias(d)

        def forward(self, x):
            return x + self.ln1(x)


    class InlineBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * self.weight
""")


def student_namespace() -> dict:
    """A module's globals, as the worker's namespace is: the block looks its sublayer up there."""
    import types

    module = types.ModuleType("student_under_test")
    exec(compile(STUDENT, "student_under_test.py", "exec"), vars(module))  # noqa: S102 - test fixture
    return vars(module)


def _call(entry: str, stand_ins: dict | None = None) -> dict:
    x = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(1))
    call = {"entry": entry, "kind": "module", "inputs": [{"value": x}], "want": ["output"], "seed": 0,
            "init_args": [4], "init_kwargs": {}, "train": False, "state": None}
    if stand_ins:
        call["stand_ins"] = stand_ins
    return call, x


def test_stand_in_replaces_the_class_for_one_call_and_is_undone():
    namespace = student_namespace()
    norm = namespace["Norm"]
    call, x = _call("Block", {"Norm": "scaled_tanh_norm"})
    result = execute(namespace, call)
    assert result["ok"], result
    assert torch.allclose(result["output"], x + torch.tanh(x))  # found through the alias; ones gain
    assert namespace["Norm"] is norm and namespace["Alias"] is norm, "every binding restored"
    plain = execute(namespace, _call("Block")[0])
    assert not torch.allclose(plain["output"], result["output"]), "without stand_ins the student's class runs"


def test_stand_ins_reach_the_modules_of_the_submissions_folder_as_they_are_now(tmp_path):
    """A helper module of the submission's folder that imported the class is patched too; the folder's modules
    are those whose file is in it at the call (each module's place is remembered, not its verdict)."""
    import sys
    import types

    from validator import standins

    namespace = student_namespace()
    (tmp_path / "sub").mkdir()
    tmp_path = tmp_path / "sub"
    helper = types.ModuleType("helper_of_the_submission")
    helper.Norm = namespace["Norm"]
    helper.__file__ = str(tmp_path.parent / "elsewhere" / "helper.py")
    sys.modules[helper.__name__] = helper
    try:
        origin = str(tmp_path / "layers.py")
        standins.patch(namespace, {"Norm": "scaled_tanh_norm"}, origin)()
        assert all(space is not vars(helper) for space in standins._student_modules(namespace, origin))
        helper.__file__ = str(tmp_path / "helper.py")  # now in the folder
        restore = standins.patch(namespace, {"Norm": "scaled_tanh_norm"}, origin)
        assert helper.Norm is STAND_INS["scaled_tanh_norm"]
        restore()
        assert helper.Norm is namespace["Norm"]
    finally:
        del sys.modules[helper.__name__]


def test_stand_ins_that_cannot_reach_the_block_are_reported_not_raised():
    namespace = student_namespace()
    missing = execute({"Block": namespace["Block"]}, _call("Block", {"Norm": "scaled_tanh_norm"})[0])
    assert not missing["ok"] and missing["stage"] == "stand_ins"
    assert "defines no Norm" in missing["exception"]["message"]
    inline = execute(namespace, _call("InlineBlock", {"Norm": "scaled_tanh_norm"})[0])
    assert not inline["ok"] and inline["stage"] == "stand_ins"
    assert "build the sublayers of InlineBlock from your own Norm" in inline["exception"]["message"]


def test_stand_ins_have_the_contract_parameters_and_are_causal():
    assert set(STAND_INS.values()) == {ScaledTanhNorm, CausalMeanAttention, TanhGateFeedForward}
    attn = CausalMeanAttention(8, 2, 16, 10000.0, device=None, dtype=torch.float64)
    assert {n: tuple(p.shape) for n, p in attn.named_parameters()} == {
        f"{k}_proj.weight": (8, 8) for k in ("q", "k", "v", "output")}
    assert attn.q_proj.weight.dtype == torch.float64
    ffn = TanhGateFeedForward(8, d_ff=5)
    assert {n: tuple(p.shape) for n, p in ffn.named_parameters()} == {
        "w1.weight": (5, 8), "w2.weight": (8, 5), "w3.weight": (5, 8)}
    x = torch.randn(3, 6, 8, dtype=torch.float64)
    y = x.clone()
    y[:, 4:] = torch.randn(3, 2, 8, dtype=torch.float64)
    assert torch.equal(attn(x)[:, :4], attn(y)[:, :4])
    assert tuple(ScaledTanhNorm(8).weight.shape) == (8,)


# -- gradings: each kind catches the mutant it is for, the reference passes --------------------

def _status(path, challenge, check):
    (result,) = grade_file(path, challenge, seeds=[0], checks={check})
    c = next(c for c in result.checks if c.id == check)
    return c.status, c.message


def test_wiring_grades_the_block_apart_from_its_sublayers():
    """A broken RMSNorm passes the wiring check; a post-norm block fails it; the reference passes."""
    folder = IMPLEMENTATIONS / "transformer_block" / "broken"
    assert _status(folder / "rmsnorm_sum_not_mean.py", "transformer_block", "wiring")[0] == "passed"
    status, message = _status(folder / "post_norm.py", "transformer_block", "wiring")
    assert status == "failed" and "pre-norm" in message


@pytest.mark.thorough
@pytest.mark.parametrize("challenge,check,mutant,words", [
    ("attention", "causal", "mask_ignored", "changed the output at position"),
    ("multihead_self_attention", "causal", "no_causal_mask", "changed the output at position"),
    ("rope", "pair_norms_preserved", "half_split_pairs", "adjacent pair"),
    ("rope", "relative_positions", "no_pair_swap", "depend only on m - n"),
    ("rope", "tables_not_in_state_dict", "persistent_tables", "persistent=False"),
    ("transformer_block", "wiring", "sublayers_inline", "build the sublayers"),
])
def test_new_kind_catches_its_mutant_and_passes_the_reference(challenge, check, mutant, words):
    status, message = _status(IMPLEMENTATIONS / challenge / "broken" / f"{mutant}.py", challenge, check)
    assert status in ("failed", "error") and words in message, message
    assert _status(REFERENCE, challenge, check)[0] == "passed"


def test_causal_check_names_a_0d_output_rather_than_two_equal_shapes(tmp_path):
    """An output summed to a scalar has no sequence axis: the message says so, not "shape () and ()"."""
    source = (IMPLEMENTATIONS / "attention" / "correct" / "logsumexp.py").read_text()
    path = tmp_path / "layers.py"
    path.write_text(source + "\n\n_attention = scaled_dot_product_attention\n\n\n"
                    "def scaled_dot_product_attention(Q, K, V, mask=None):\n"
                    "    return _attention(Q, K, V, mask).sum()\n")
    status, message = _status(path, "attention", "causal")
    assert status == "failed" and "the output is a 0-d tensor; expected a tensor with a sequence axis" in message, \
        message


def test_causal_and_relation_cases_honour_input_dtype_and_regimes(tmp_path):
    """Both kinds take CaseParams: `input_dtype` and `regimes` were accepted there and silently ignored."""
    from types import SimpleNamespace

    from hypothesis import strategies as st

    from validator.checks import params_of
    from validator.checks.sequence import _for_cases
    from validator.profiles import get_settings

    challenge = load(tmp_path, "      - {id: c, kind: values, test: causal, sequence: {Q: -2}, input_dtype: bfloat16,\n"
                               "         regimes: [[q > k], [q < k, q > 1]], points: 1}")
    check = next(c for c in challenge.checks if c.id == "c")
    ctx = SimpleNamespace(challenge=challenge, settings=get_settings("quick"), check_seed=lambda _: 7)
    seen = []
    runs = _for_cases(ctx, check, params_of(check), st.just("extra"), seen.append)
    assert runs == len(seen) > 0
    assert all(case.inputs["Q"].dtype == torch.bfloat16 and case.inputs["K"].dtype == torch.bfloat16 for case in seen)
    assert all(case.extra == "extra" for case in seen)
    sides = {case.dims["q"] > case.dims["k"] for case in seen if case.dims["q"] != case.dims["k"]}
    assert sides == {True, False} and all(case.dims["q"] != case.dims["k"] for case in seen)


def test_an_input_grown_to_hold_its_required_ids_shares_its_grown_batch_dims(tmp_path):
    """IDs that must repeat need two elements: a drawn batch of (1,) grows to (2,), and the float input
    drawn after them must get (2,) too, not the (1,) recorded before the growth."""
    path = tmp_path / "grow.yaml"
    path.write_text(textwrap.dedent("""\
        id: grow
        title: Grow
        entries:
          f: {kind: function, call: [ids, x]}
        dims: {n: [2, 5]}
        inputs:
          ids: {type: token_ids, high: n, repeats: true, shape: ["..."], max_leading_dims: 1, max_side: 3}
          x: {type: float, shape: ["..."], max_leading_dims: 1, max_side: 3}
        checks:
          - {id: a, kind: values, test: values, points: 1}
        """))
    challenge = load_challenge(path)
    shapes = []

    @settings(max_examples=60, database=None, deadline=None)
    @given(case_strategy(challenge, challenge.entries["f"]))
    def prop(case):
        shapes.append((tuple(case.inputs["ids"].shape), tuple(case.inputs["x"].shape)))
    prop()
    assert (2,) in {ids for ids, _ in shapes}, "the growth this test is about never happened"
    assert all(ids == x for ids, x in shapes), [s for s in shapes if s[0] != s[1]][:3]


def test_the_blocks_input_unchanged_check_draws_more_than_position_0():
    """At a lone position 0 RoPE is the identity (cos 1, sin 0): a RoPE that scales in place only without autograd
    changes nothing there. With `--seed 61` all three drawn blocks had seq_len 1 and that bug kept the check; the
    check's regime (seq_len > 1) makes every case show it."""
    broken = IMPLEMENTATIONS / "transformer_block" / "broken" / "rope_in_place_without_autograd.py"
    for path, status in ((broken, "failed"), (REFERENCE, "passed")):
        (result,) = grade_file(path, "transformer_block", seeds=(61,), profile="batch", checks=["input_unchanged"])
        (check,) = [c for c in result.checks if c.kind != "question"]
        assert check.status == status, (path.name, check.message)
        if status == "failed":
            assert "with seq_len > 1" in check.message and "under torch.no_grad()" in check.message
