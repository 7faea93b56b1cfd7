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
