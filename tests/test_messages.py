"""Messages keep their text on the terminal: brackets in data are not rich markup; the warm-up's stderr is
passed on without torch's profiler notices."""

from __future__ import annotations

import io
import os

from rich.console import Console

from validator.reporters import terminal
from validator.results import ChallengeResult, CheckResult, Report
from validator.submit import main as submit_main

BRACKETED = "add a [tool.validator.map] table, or [bold]x[/bold] and [red]"


def test_usage_errors_keep_bracketed_text(tmp_path, capsys):
    code = submit_main(student=str(tmp_path / "nowhere"), interactive=False)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "with a [tool.validator.map] table in its pyproject.toml" in err, err


def test_the_terminal_report_prints_data_as_text():
    check = CheckResult(id="values_[x]", kind="values", status="failed", score=0.0, max_score=1.0,
                        message=BRACKETED, title="title [dim]kept[/dim]", reproduce="validator submit-build [a]")
    skipped = CheckResult(id="timing", kind="performance", status="skipped", score=0.0, max_score=1.0,
                          message="skipped: [italic]why[/italic]")
    challenge = ChallengeResult(id="c", title="Challenge [b]", checks=[check, skipped], problem="problem [i]")
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, color_system=None)
    terminal.render_header(console, seed=1, profile="[p]", student="s[1].py", challenges=[])
    terminal.render_challenge(console, challenge)
    terminal.render_summary(console, Report(challenges=[challenge], seed=1, student="s", profile="p",
                                            notes=["note [n]"]))
    text = out.getvalue()
    for kept in (BRACKETED, "title [dim]kept[/dim]", "values_[x]", "Challenge [b]", "problem [i]",
                 "skipped: [italic]why[/italic]", "validator submit-build [a]", "profile [p]", "note [n]"):
        assert kept in text, (kept, text)


def test_warm_up_drops_profiler_notices_and_passes_the_rest_on(capfd, monkeypatch):
    from validator.worker import main

    def warm():
        os.write(2, b"USDT:2026 SyncActivityProfilerHandler.cpp:52] profiler_start\na real warning\n")

    monkeypatch.setattr(main, "_warm", warm)
    main._prepare_template()
    err = capfd.readouterr().err
    assert err == "a real warning\n"


def test_a_layer_that_fails_an_input_once_and_passes_it_again_is_told_it_is_not_deterministic(tmp_path):
    """Hypothesis replays a failing input before reporting it; a layer whose second run passes (uninitialised memory,
    a random draw, state across calls) made it raise its 'unreliable results' error, which the grader reported as its
    own internal error ('not your fault, please report it'), and the verdict changed with the seed. It is the
    layer's failure, reported as such, with why it may not reproduce."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import grade_file

    layers = tmp_path / "layers.py"
    layers.write_text("import torch\n\nSEEN = set()\n\n\ndef softmax(x, dim):\n"  # wrong the first time it sees x
                      "    e = torch.exp(x - x.amax(dim=dim, keepdim=True))\n    out = e / e.sum(dim=dim, keepdim=True)\n"
                      "    key = (tuple(x.shape), x.double().sum().item())\n    first = key not in SEEN\n"
                      "    SEEN.add(key)\n    return out + 1 if first else out\n")
    (result,) = grade_file(layers, "softmax", seeds=[0], checks=["matches_reference"])
    [check] = [c for c in result.checks if c.id == "matches_reference"]
    assert check.status == "failed", check
    assert "internal grader error" not in check.message and "is not a function of its inputs" in check.message
