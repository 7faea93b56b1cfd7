"""`validator strength`: the mutant generator, the equivalence marks, the cache, and the engine features
that close the classes of survivors it found (defaults, several invalid IDs, required messages, regimes).

The default tier generates mutants (no worker), grades three mutants of one challenge through the batch
slots, and grades one broken file per closed class on the check that names it. The catalogue's own
strength report (every non-equivalent mutant caught) is in the thorough tier.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from helpers import IMPLEMENTATIONS, catalogue, code_checks, grade_file
from validator import paths
from validator.instructor.mutants import generate
from validator.spec import SpecError, load_challenge

REFERENCE = paths.reference_dir() / "layers.py"

TOY = textwrap.dedent('''\
    import torch


    def helper(x, scale=2.0):
        # BEGIN SOLUTION
        return x * scale
        # END SOLUTION


    def entry(x, limit=3, flag=True):
        """Docstring: never mutated."""
        # BEGIN SOLUTION
        if x.shape[-1] > limit and flag:
            raise ValueError(f"too wide: {x.shape[-1]}")
        y = torch.cat([x, x], dim=-1)
        return helper(y) - 1
        # END SOLUTION


    def unrelated(x):
        # BEGIN SOLUTION
        return x + 1
        # END SOLUTION
''')


# -- the generator ---------------------------------------------------------------------------------
def test_every_operator_class_is_generated_with_a_readable_id():
    ids = {m.id for m in generate(TOY, ["entry"])}
    expected = {
        "entry:L0:default:limit:3->4", "entry:L0:default:flag:True->False",
        "entry:L3:compare_op:>->>=", "entry:L3:compare_op:>-><=", "entry:L3:bool_op:and->or",
        "entry:L3:drop_stmt:if", "entry:L4:drop_stmt:raise", "entry:L4:drop_arg:ValueError[0]",
        "entry:L5:drop_kwarg:cat.dim", "entry:L5:drop_arg:cat[0]",
        "entry:L6:arith:-->+", "entry:L6:constant:1->2",
        "helper:L0:default:scale:2.0->4.0", "helper:L2:arith:*->/",  # a helper the entry calls
    }
    assert expected <= ids, sorted(expected - ids)
    assert not any(i.startswith("unrelated") for i in ids), "a function the entry does not call was mutated"


def test_mutants_are_one_change_each_compile_and_are_deterministic():
    first, second = generate(TOY, ["entry"]), generate(TOY, ["entry"])
    assert [m.id for m in first] == [m.id for m in second]
    assert len({m.id for m in first}) == len(first)
    assert len({m.source for m in first}) == len(first)
    for m in first:
        compile(m.source, m.id, "exec")
        changed = [line for line in m.diff(TOY, context=0).splitlines() if line.startswith("@@")]
        assert len(changed) == 1, f"{m.id} changes more than one place"
        assert "Docstring" not in m.diff(TOY, context=0)


def test_ids_survive_edits_elsewhere_in_the_file():
    shifted = TOY.replace("import torch\n", "import torch\n\n\ndef added_above(z):\n    return z\n")
    assert [m.id for m in generate(shifted, ["entry"])] == [m.id for m in generate(TOY, ["entry"])]


def test_the_reference_mutants_of_a_challenge_stay_in_its_entries():
    cat = catalogue()
    ids = [m.id for m in generate(REFERENCE.read_text(), cat["learned_positional_embedding"].entries)]
    assert ids and all(i.startswith("LearnedPositionalEmbedding.") for i in ids)


# -- equivalence marks -------------------------------------------------------------------------------
SPEC = textwrap.dedent("""\
    id: toy
    title: Toy
    entries:
      entry: {kind: function, call: [x]}
    dims: {n: [1, 4]}
    inputs:
      x: {type: float, shape: ["...", n]}
    checks:
      - {id: first, kind: values, test: values, points: 1}
    strength:
      equivalent:
""")


def _toy(tmp_path, marks: str):
    path = tmp_path / "toy.yaml"
    path.write_text(SPEC + textwrap.indent(textwrap.dedent(marks), "    "))
    return path


def test_marks_need_a_reason_and_are_unique(tmp_path):
    with pytest.raises(SpecError, match="reason"):
        load_challenge(_toy(tmp_path, '- {mutant: "entry:L3:drop_stmt:if", reason: "ok"}\n'))
    with pytest.raises(SpecError, match="more than once"):
        load_challenge(_toy(tmp_path, '- {mutant: a, reason: "nothing reads it, ever"}\n'
                                      '- {mutant: a, reason: "nothing reads it, ever"}\n'))


def test_a_mark_matches_by_id_or_star_and_an_unknown_one_is_only_a_warning(tmp_path):
    from validator.instructor.strength import equivalence_reason, unmatched_marks

    challenge = load_challenge(_toy(tmp_path, '- {mutant: "entry:L4:drop_arg:ValueError[0]", reason: "message text only"}\n'
                                              '- {mutant: "helper:*", reason: "the helper is not graded here"}\n'
                                              '- {mutant: "entry:L99:gone", reason: "a line that moved away"}\n'))
    ids = [m.id for m in generate(TOY, ["entry"])]
    assert equivalence_reason(challenge, "entry:L4:drop_arg:ValueError[0]") == "message text only"
    assert equivalence_reason(challenge, "helper:L2:arith:*->/") == "the helper is not graded here"
    assert equivalence_reason(challenge, "entry:L4:drop_arg:ValueErrorX0]") is None  # `[` is literal, not a class
    assert unmatched_marks(challenge, ids) == ["entry:L99:gone"]


def test_a_mark_wherever_included_holds_in_the_composites_and_a_plain_one_does_not(tmp_path):
    """A part's mutant that is equivalent whatever calls it is marked once, in the part's spec; a mark that
    depends on the part's own contract stays there, and each composite judges the mutant for itself."""
    from validator.instructor.strength import equivalence_reason, inherited_marks

    part = load_challenge(_toy(tmp_path, '- {mutant: "helper:L2:*", reason: "a fresh tensor either way", '
                                         'wherever_included: true}\n'
                                         '- {mutant: "entry:L4:*", reason: "the part contract says nothing of it"}\n'))
    composite = part.model_copy(update={"id": "composite", "strength": type(part.strength)()})
    catalogue = {part.id: part, composite.id: composite}
    inherited = inherited_marks(catalogue, composite)
    assert equivalence_reason(composite, "helper:L2:arith:*->/", inherited) == \
        f"a fresh tensor either way (marked in {part.id}, wherever included)"
    assert equivalence_reason(composite, "entry:L4:drop_arg:ValueError[0]", inherited) is None
    assert inherited_marks(catalogue, part) == []  # a challenge's own marks are not inherited from itself


def test_the_self_check_fails_on_an_unmarked_survivor_of_a_current_run(tmp_path, monkeypatch):
    from validator.instructor.fixtures import fingerprint
    from validator.instructor.selfcheck import strength_problems

    monkeypatch.setenv("VALIDATOR_STRENGTH_CACHE", str(tmp_path))
    challenge = catalogue()["learned_positional_embedding"]
    assert strength_problems(challenge, reference_file=REFERENCE) == []  # no run: nothing to say
    summary = {"fingerprint": fingerprint(challenge, reference_file=REFERENCE),
               "survivors": ["LearnedPositionalEmbedding.__init__:L5:drop_stmt:assign", "Made.up:L1:arith:+->-"]}
    (tmp_path / "learned_positional_embedding.summary.json").write_text(json.dumps(summary))
    (problem,) = strength_problems(challenge, reference_file=REFERENCE)
    assert "Made.up:L1:arith:+->-" in problem and "L5:drop_stmt" not in problem  # the marked one is fine
    summary["fingerprint"] = "stale"
    (tmp_path / "learned_positional_embedding.summary.json").write_text(json.dumps(summary))
    assert strength_problems(challenge, reference_file=REFERENCE) == []


def test_a_handout_spec_has_no_strength_block():
    import yaml

    from validator.instructor.release import without_strength

    text = (paths.challenges_dir() / "transformer_embedding.yaml").read_text()
    assert "strength" in yaml.safe_load(text)
    stripped = yaml.safe_load(without_strength(text))
    assert "strength" not in stripped and stripped["checks"] == yaml.safe_load(text)["checks"]


def test_the_command_is_a_staff_command_and_refuses_an_unknown_challenge(capsys):
    from validator import cli
    from validator.instructor.strength import main

    assert "strength" in cli.STAFF_COMMANDS
    assert main(challenges=["no_such_challenge"]) == 2
    assert "unknown challenge no_such_challenge" in capsys.readouterr().err


# -- grading mutants through the batch slots -----------------------------------------------------------
def test_three_mutants_are_graded_fail_fast_then_come_from_the_cache(tmp_path):
    from validator.instructor.strength import strength

    only = ["LearnedPositionalEmbedding.forward:L13:arith:+->-",       # wrong values
            "LearnedPositionalEmbedding.forward:L10:compare_op:>->>=",  # refuses seq_len == max_seq_len
            "LearnedPositionalEmbedding.__init__:L5:drop_stmt:assign"]  # survives; marked equivalent
    report = strength(challenges=["learned_positional_embedding"], only=only, jobs=1, cache_dir=tmp_path)
    (ch,) = report.challenges
    by_id = {r.id: r for r in ch.results}
    assert set(by_id) == set(only) and ch.graded == 3
    assert by_id[only[0]].status == "caught" and len(by_id[only[0]].caught_by) == 1  # stopped at the first
    assert by_id[only[1]].status == "caught" and by_id[only[1]].caught_by == ["full_length"]
    assert by_id[only[2]].status == "equivalent" and "nothing reads" in by_id[only[2]].reason
    assert "-        self.embedding_dim = embedding_dim" in by_id[only[2]].diff
    again = strength(challenges=["learned_positional_embedding"], only=only, jobs=1, cache_dir=tmp_path)
    assert again.challenges[0].graded == 0 and all(r.cached for r in again.challenges[0].results)
    assert [r.status for r in again.challenges[0].results] == [r.status for r in ch.results]
    json.dumps(report.to_dict())  # plain data
    from validator.reporters.strength import render_text

    text = render_text(report)
    assert "learned_positional_embedding: 2/2 non-equivalent mutants caught" in text and "SURVIVED" not in text


def test_the_html_report_shows_each_survivor_escaped_and_each_equivalents_reason(tmp_path):
    from validator.instructor.strength import ChallengeStrength, MutantResult, StrengthReport
    from validator.reporters.strength import write_html

    hostile = "-    return x\n+    return '<script>alert(1)</script>'\n"
    ch = ChallengeStrength(id="softmax", fingerprint="f", mutants=3, caught=1, survived=1, equivalent=1,
                           results=[MutantResult(id="softmax:L3:const:1->2", status="caught", caught_by=["values"]),
                                    MutantResult(id="softmax:L4:drop_stmt:return", status="survived", diff=hostile,
                                                 needs=["inputs far from zero"]),
                                    MutantResult(id="softmax:L5:kwarg", status="equivalent",
                                                 reason="the library default is the same value")],
                           catches={"values": 1})
    path = tmp_path / "strength.html"
    write_html(StrengthReport(challenges=[ch], seed=0, profile="batch"), path)
    text = path.read_text(encoding="utf-8")
    assert "<script" not in text and "&lt;script&gt;" in text
    assert "SURVIVED softmax:L4:drop_stmt:return" in text and "inputs far from zero" in text
    assert "the library default is the same value" in text and "1/2 caught (50.0%)" in text


def test_each_report_lists_the_bug_class_operators_beside_the_one_point_mutants(tmp_path):
    from validator.instructor.strength import ChallengeStrength, MutantResult, StrengthReport
    from validator.reporters.strength import render_text, write_html, write_json

    results = [MutantResult(id="RMSNorm.forward:L2:arith:*->/", status="caught", caught_by=["values"]),
               MutantResult(id="RMSNorm.forward:L3:constant:1->2", status="equivalent", reason="same"),
               MutantResult(id="RMSNorm.forward:inplace_input:1", status="caught", caught_by=["inputs_unchanged"],
                            family="bug-class", operator="inplace_input"),
               MutantResult(id="RMSNorm.forward:drop_upcast:1", status="survived", diff="-    x = x.float()\n",
                            needs=["a reduced-precision check"], family="bug-class", operator="drop_upcast"),
               MutantResult(id="RMSNorm.__init__:reseed:1", status="caught", caught_by=["rng_stream"],
                            family="bug-class", operator="reseed")]
    ch = ChallengeStrength(id="rms_norm", fingerprint="f", mutants=5, caught=3, survived=1, equivalent=1,
                           results=results, catches={"values": 1, "inputs_unchanged": 1, "rng_stream": 1})
    ch.tally()
    assert ch.families["one-point"] == {"mutants": 2, "caught": 1, "survived": 0, "equivalent": 1, "errors": 0}
    assert list(ch.bug_classes) == ["inplace_input", "reseed", "drop_upcast"]  # in BUG_CLASSES order
    report = StrengthReport(challenges=[ch], seed=0, profile="batch")

    text = render_text(report)
    assert "  one-point mutants: 1/1 caught, 1 equivalent" in text
    assert ("  bug-class mutants: 2/3 caught (inplace_input 1/1 caught; reseed 1/1 caught; drop_upcast 0/1 caught)"
            in text)
    assert "SURVIVED RMSNorm.forward:drop_upcast:1 (bug class)" in text
    assert "by family: one-point 1/1 caught, 1 equivalent; bug-class 2/3 caught" in text

    write_json(report, tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["families"]["bug-class"]["survived"] == 1
    assert data["challenges"][0]["bug_classes"]["drop_upcast"]["survived"] == 1
    assert data["challenges"][0]["results"][3]["operator"] == "drop_upcast"

    write_html(report, tmp_path / "s.html")
    html = (tmp_path / "s.html").read_text()
    assert "<th>bug-class</th>" in html and "<td>2/3 caught</td>" in html
    assert "drop_upcast 0/1 caught" in html and "SURVIVED RMSNorm.forward:drop_upcast:1 (bug class)" in html


# -- the engine features, one broken file per class, caught by the check that names it ----------------
CLASSES = [
    ("sinusoidal_positional_encoding", "default_base_1000.py", {"function_default_base", "module_defaults"}),
    ("transformer_embedding", "default_dropout_01.py", {"default_configuration"}),
    ("token_embedding", "one_bad_id_to_int.py", {"several_ids_too_large_raise"}),
    ("sinusoidal_positional_encoding", "odd_dim_empty_message.py", {"function_odd_dim_message"}),
    ("sinusoidal_positional_encoding", "stored_table_bound_on_width.py", {"module_extrapolates"}),
    ("sinusoidal_positional_encoding", "float32_buffer_promotes_low_precision_x.py", {"module_bfloat16_dtype"}),
]


@pytest.mark.parametrize("challenge,name,owners", CLASSES, ids=[c[1] for c in CLASSES])
def test_each_class_of_survivor_is_caught_by_the_check_that_names_it(challenge, name, owners):
    (result,) = grade_file(IMPLEMENTATIONS / challenge / "broken" / name, challenge, seeds=[0], checks=owners)
    lost = {c.id for c in code_checks(result) if c.status in ("failed", "error")}
    assert lost == owners, [(c.id, c.status, c.message[:200]) for c in code_checks(result)]


@pytest.mark.parametrize("challenge,owners", [
    ("sinusoidal_positional_encoding", {"function_default_base", "module_defaults", "function_odd_dim_message",
                                        "module_extrapolates", "module_extrapolates_with_base", "module_bfloat16_dtype"}),
    ("transformer_embedding", {"default_configuration", "several_ids_too_large_raise", "sinusoidal_extends",
                               "sinusoidal_extends_dtype"}),
])
def test_a_correct_implementation_passes_the_new_checks(challenge, owners):
    correct = sorted((IMPLEMENTATIONS / challenge / "correct").glob("*.py"))[0]
    for seed in (0, 1):
        (result,) = grade_file(correct, challenge, seeds=[seed], checks=owners)
        assert all(c.status == "passed" for c in code_checks(result)), \
            [(c.id, c.status, c.message[:200]) for c in code_checks(result)]


def test_the_defaults_check_refuses_a_configuration_that_is_not_the_contracts(tmp_path):
    """A spec bug (the check's option values differ from the reference's defaults) is the grader's error."""
    spec = (paths.challenges_dir() / "sinusoidal_positional_encoding.yaml").read_text()
    bad = spec.replace("dims: {max_seq_len: 2048, seq_len: 24}", "dims: {max_seq_len: 2048, seq_len: 24, base: 500}")
    assert bad != spec
    (tmp_path / "sinusoidal_positional_encoding.yaml").write_text(bad)
    from validator.api import grade
    from validator.spec import load_catalogue

    report = grade(REFERENCE, challenges=["sinusoidal_positional_encoding"], checks=["module_defaults"],
                   catalogue=load_catalogue(tmp_path), profile="quick", reference_mode="live")
    (check,) = code_checks(report.challenges[0])
    assert check.status == "error" and "contract's defaults" in check.message


def test_several_injected_ids_land_at_distinct_positions():
    from validator.cases import case_strategy

    challenge = catalogue()["token_embedding"]
    entry = challenge.entries["Embedding"]

    @settings(max_examples=25, database=None)
    @given(case_strategy(challenge, entry, {"token_ids": {"inject": ["high", "high+3"], "shape": [1]}}))
    def prop(case):
        ids, n = case.inputs["token_ids"], case.dims["num_embeddings"]
        assert sorted(ids[ids >= n].tolist()) == [n, n + 3]  # a one-element shape grows to hold both

    prop()


def test_regimes_are_validated_and_each_is_covered():
    from validator.cases import case_strategy

    challenge = catalogue()["transformer_embedding"]
    entry = challenge.entries["TransformerEmbedding"]
    for regime, holds in ((["seq_len > max_seq_len", "seq_len <= embedding_dim"], lambda d: d["seq_len"] <= d["embedding_dim"]),
                          (["seq_len > max_seq_len", "seq_len > embedding_dim"], lambda d: d["seq_len"] > d["embedding_dim"])):
        @settings(max_examples=10, database=None, suppress_health_check=[HealthCheck.too_slow])  # a loaded machine
        @given(case_strategy(challenge, entry, fixed_dims={"max_seq_len": 2}, where=regime))
        def prop(case):
            assert case.dims["seq_len"] > 2 and holds(case.dims)

        prop()


def test_a_regime_naming_no_dim_is_a_spec_error(tmp_path):
    path = tmp_path / "toy.yaml"
    text = SPEC.replace("points: 1}", "points: 1, regimes: [[n > width]]}").replace("strength:\n  equivalent:\n", "")
    assert "regimes" in text
    path.write_text(text)
    with pytest.raises(SpecError, match="width.*not a dim"):
        load_challenge(path)
    path.write_text(text.replace("regimes: [[n > width]]", "dims: {n: 2}, regimes: [[n > 3]]"))
    with pytest.raises(SpecError, match="never holds"):
        load_challenge(path)


# -- the catalogue holds the line ----------------------------------------------------------------------
@pytest.mark.thorough
def test_the_catalogue_leaves_no_unmarked_survivor(tmp_path):
    """Every mutant of the reference that can change behaviour is caught; the rest are marked with a reason.
    Cached in this test's own folder, not the checkout's .validator-cache/strength: its summaries there would
    be read by `regenerate --check` (test_regenerate_check_passes_on_the_catalogue), whose verdict would then
    depend on which test ran first."""
    from validator.instructor.strength import strength

    report = strength(jobs=2, cache_dir=tmp_path)
    problems = [f"{c.id}: {r.id}\n{r.diff}" for c in report.challenges for r in c.results
                if r.status in ("survived", "error")]
    assert not problems, "\n".join(problems)
    warnings = [w for c in report.challenges for w in c.warnings]
    assert not warnings, warnings


def test_several_seeds_report_each_and_exit_with_the_worst(tmp_path, monkeypatch):
    """`validator strength --seed 5 --seed 41`: one report per seed, each under its heading and in a file of its
    own, a last line naming the seeds with survivors, and the exit status of the worst seed."""
    import io

    from validator import cli
    from validator.instructor import strength as st

    def fake(*, seed, **_):
        survived = 1 if seed == 41 else 0
        result = st.MutantResult(id="softmax:L10:drop_kwarg:amax.dim", status="survived" if survived else "caught")
        ch = st.ChallengeStrength(id="softmax", fingerprint="f", mutants=1, caught=1 - survived, survived=survived,
                                  results=[result])
        ch.tally()
        return st.StrengthReport(challenges=[ch], seed=seed, profile="batch")

    monkeypatch.setattr(st, "strength", fake)
    out = io.StringIO()
    code = st.main(seeds=[5, 41], json_path=str(tmp_path / "report.json"), stream=out)
    text = out.getvalue()
    assert code == st.EXIT_SURVIVORS
    assert text.index("== seed 5") < text.index("== seed 41")
    assert text.rstrip().endswith("2 seeds (5, 41): survivors on seed 41: 1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.seed41.json", "report.seed5.json"]
    assert json.loads((tmp_path / "report.seed41.json").read_text())["survived"] == 1
    out = io.StringIO()
    assert st.main(seeds=[5], json_path=str(tmp_path / "one.json"), stream=out) == st.EXIT_OK
    assert "== seed" not in out.getvalue() and (tmp_path / "one.json").is_file()  # one seed: as before
    args = cli.build_parser().parse_args(["strength", "--seed", "5", "--seed", "41"])
    assert args.seeds == [5, 41]
