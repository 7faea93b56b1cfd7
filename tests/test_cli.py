"""The command line: a handout refuses staff commands before doing any work and hides them from --help."""

from __future__ import annotations

import pytest

from validator import cli


@pytest.fixture
def handout(monkeypatch, tmp_path):
    monkeypatch.setenv("VALIDATOR_REFERENCE", str(tmp_path / "no-reference"))


@pytest.mark.parametrize("command", ["grade", "merge", "regenerate", "release"])
def test_handout_refuses_staff_commands(handout, capsys, tmp_path, command):
    args = {"grade": ["grade", str(tmp_path), "--out", str(tmp_path / "out")],
            "merge": ["merge", str(tmp_path), "--out", str(tmp_path / "out")]}.get(command, [command])
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert f"`validator {command}` is a staff command" in err and "submit-build" in err
    assert not (tmp_path / "out").exists()  # refused before doing any work


def test_handout_help_lists_only_student_commands(handout, capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "{submit-build}" in out  # the usage line's list of commands
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("    ") and line.split()}
    assert listed == {"submit-build"}


def test_repository_help_lists_staff_commands(capsys):
    assert cli.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert all(command in out for command in cli.STAFF_COMMANDS)
