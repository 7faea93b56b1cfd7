"""Spec errors name the file, the line and the rule that was broken."""

import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from validator.spec import SpecError, load_challenge
from validator.spec.loader import load_catalogue

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "challenges" / "token_embedding.yaml"


def write_variant(tmp_path: Path, mutate) -> Path:
    data = yaml.safe_load(SPEC.read_text())
    mutate(data)
    path = tmp_path / "token_embedding.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(needle)


def test_shipped_spec_loads():
    ch = load_challenge(SPEC)
    assert ch.id == "token_embedding" and ch.checks


def test_negative_points_reports_line_and_rule(tmp_path):
    path = write_variant(tmp_path, lambda d: d["checks"][2].update(points=-1))
    with pytest.raises(SpecError) as err:
        load_challenge(path)
    text = str(err.value)
    assert f"{path}:" in text and "checks[2].points" in text and "greater than or equal to 0" in text
    assert err.value.problems[0][0] == line_of(path, "points: -1")


def test_unknown_test_lists_known_ones(tmp_path):
    path = write_variant(tmp_path, lambda d: d["checks"][0].update(test="shapez"))
    with pytest.raises(SpecError, match=r"unknown test 'shapez'; known tests: .*values"):
        load_challenge(path)


def test_bad_test_parameter_is_caught_at_load(tmp_path):
    def mutate(d):
        check = next(c for c in d["checks"] if c["test"] == "init_distribution")
        check["distribution"] = {"family": "gaussian"}
    path = write_variant(tmp_path, mutate)
    with pytest.raises(SpecError, match="unknown distribution family 'gaussian'"):
        load_challenge(path)


def test_typo_in_a_test_parameter_is_caught(tmp_path):
    def mutate(d):
        check = next(c for c in d["checks"] if c["test"] == "op_scaling")
        check["max_extra_opps"] = 3
    path = write_variant(tmp_path, mutate)
    with pytest.raises(SpecError, match="max_extra_opps"):
        load_challenge(path)


@pytest.mark.parametrize("change,message", [
    ({"runs_of": "int32_ids"}, "'int32_ids' is not an op_scaling check of this challenge"),
    ({"runs_of": "nope"}, "'nope' is not an op_scaling check of this challenge"),
    ({"max_examples": 3}, "no `inputs` or `max_examples` with `runs_of`"),
    ({"inputs": {"token_ids": {"shape": ["batch", "seq_len"]}}}, "no `inputs` or `max_examples` with `runs_of`"),
])
def test_a_runtime_check_that_judges_another_checks_runs_names_an_op_scaling_check(tmp_path, change, message):
    """`runs_of` borrows the traced runs of an op_scaling check: it must name one, and draw no cases of its own."""
    def mutate(d):
        check = next(c for c in d["checks"] if c["test"] == "forbidden_runtime")
        assert check["runs_of"] == "vectorised"
        check.update(change)
    path = write_variant(tmp_path, mutate)
    with pytest.raises(SpecError, match=message):
        load_challenge(path)


def test_invalid_yaml_gives_the_parser_line(tmp_path):
    path = tmp_path / "token_embedding.yaml"
    path.write_text("id: token_embedding\ntitle: [unclosed\nentries: {}\n")
    with pytest.raises(SpecError) as err:
        load_challenge(path)
    assert "invalid YAML" in str(err.value) and err.value.problems[0][0] is not None


def test_id_must_match_file_name(tmp_path):
    path = write_variant(tmp_path, lambda d: d.update(id="other"))
    with pytest.raises(SpecError, match="must match the file name"):
        load_challenge(path)


def test_unknown_input_in_entry_call(tmp_path):
    path = write_variant(tmp_path, lambda d: d["entries"]["Embedding"].update(call=["ids"]))
    with pytest.raises(SpecError, match="'ids', which is not under `inputs`"):
        load_challenge(path)


def test_catalogue_reports_every_broken_file(tmp_path):
    shutil.copy(SPEC, tmp_path / "token_embedding.yaml")
    (tmp_path / "broken_one.yaml").write_text(textwrap.dedent("""\
        id: broken_one
        title: x
        entries: {}
        checks: []
        """))
    (tmp_path / "broken_two.yaml").write_text("- just\n- a list\n")
    with pytest.raises(SpecError) as err:
        load_catalogue(tmp_path)
    assert "broken_one.yaml" in str(err.value) and "broken_two.yaml" in str(err.value)


@pytest.mark.parametrize("explain,message", [
    ([{"inputs": {"positions": {"arange": True}}, "says": "x"}], "no input named 'positions' under `inputs`"),
    ([{"inputs": {"token_ids": {"arange": True, "shift": 1}}, "says": "x"}], "an explanation may set"),
    ([{"inputs": {"token_ids": {"arange": True}}}], "says"),
])
def test_a_values_checks_explanation_names_inputs_and_changes_it_knows(tmp_path, explain, message):
    def mutate(d):
        check = next(c for c in d["checks"] if c["test"] == "values")
        check["explain"] = explain
    path = write_variant(tmp_path, mutate)
    with pytest.raises(SpecError, match=message):
        load_challenge(path)
