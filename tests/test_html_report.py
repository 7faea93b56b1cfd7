"""The HTML report: one self-contained page, every student string escaped, the init plots as SVG."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console

from validator.batch.reports import report_from_dict
from validator.reporters.figures import figure_lines, text_histogram
from validator.reporters.html import Section, render_html, svg_histogram, write_html
from validator.results import ChallengeResult, CheckResult, Histogram, Report

HOSTILE = "<script>alert(1)</script>"


def figure(*, below: int = 0, above: int = 0, on_bounds=None) -> Histogram:
    """Six bins on [-3, 3], a bell-ish sample, the expected shares of a truncated normal."""
    return Histogram(title="`weight` (10, 20)", edges=[-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0],
                     counts=[2, 14, 34, 34, 14, 2], expected=[0.022, 0.136, 0.342, 0.342, 0.136, 0.022],
                     below=below, above=above, expected_label="truncated normal (mean 0, std 1, cut at [-3, 3])",
                     bounds=[-3.0, 3.0], on_bounds=on_bounds)


def report(*checks: CheckResult, problem: str | None = None, notes=()) -> Report:
    return Report(challenges=[ChallengeResult(id="token_embedding", title="Token embedding", checks=list(checks),
                                              problem=problem)],
                  seed=3, student="student/layers.py", profile="quick", duration_s=1.25, notes=list(notes))


def init_check(status: str = "failed", **fig) -> CheckResult:
    return CheckResult(id="init_distribution", kind="init", status=status, score=3.0 if status == "passed" else 0.0,
                       max_score=3.0, message="sample std is 0.02, expected 1", title="weight ~ truncated normal",
                       reproduce="validator submit-build --check init_distribution --seed 3",
                       figures=[figure(**fig)])


def bars(svg: str) -> list[str]:
    return re.findall(r'<rect class="bar[^"]*"', svg)


def test_one_bar_per_bin_and_one_per_side_with_values_outside():
    assert len(bars(svg_histogram(figure()))) == 6
    svg = svg_histogram(figure(below=3, above=1))
    assert len(bars(svg)) == 8 and len(re.findall(r'class="bar outside"', svg)) == 2
    assert '<path class="expected"' in svg and svg.count('class="bound"') == 2


def test_a_normals_tails_beyond_the_drawn_range_are_not_alarming_unless_heavy():
    normal = dict(edges=[-4.0, -2.0, 0.0, 2.0, 4.0], expected=[0.0227, 0.4772, 0.4772, 0.0227],
                  expected_below=0.00003, expected_above=0.00003)
    light = svg_histogram(Histogram(title="t", counts=[227, 4772, 4772, 227], below=1, above=1, **normal))
    heavy = svg_histogram(Histogram(title="t", counts=[10, 20, 20, 10], below=5000, above=5000, **normal))
    assert light.count('class="bar beyond"') == 2 and 'class="bar outside"' not in light
    assert heavy.count('class="bar outside"') == 2 and "beyond" in heavy


def test_bar_heights_follow_the_counts():
    svg = svg_histogram(figure())
    heights = [float(h) for h in re.findall(r'<rect class="bar"[^>]*height="([0-9.]+)"', svg)]
    assert heights[2] == heights[3] > heights[1] == heights[4] > heights[0] == heights[5] > 0


def test_values_on_a_bound_are_called_out():
    svg = svg_histogram(figure(on_bounds=[400, 0]))
    assert "400 on the bound" in svg and svg.count('<path class="atom"') == 1
    assert any("400 of your values sit exactly on the bound -3" in line for line in figure_lines([figure(on_bounds=[400, 0])]))


def test_text_histogram_merges_fine_bins_into_rows():
    fine = Histogram(title="t", edges=[i / 4 for i in range(49)], counts=[1] * 48, expected=[1 / 48] * 48)
    rows = text_histogram(fine)
    assert len(rows) == 12 and all(r.endswith("8.3%") for r in rows)


def test_page_has_the_report_and_the_plot():
    page = render_html(report(init_check(), CheckResult(id="shape", kind="shape", status="passed", score=2,
                                                        max_score=2, title="shape ok")))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "total 2/5" in page and "3 lost" in page and "some checks fell short" in page
    assert "init_distribution" in page and "sample std is 0.02, expected 1" in page
    assert "validator submit-build --check init_distribution --seed 3" in page
    assert page.count("<svg") == 1 and len(bars(page)) == 6
    # a failure is open; a pass is folded
    assert re.search(r'<details class="check failed"[^>]*\bopen>', page)
    assert re.search(r'<details class="check passed"[^>]*"\s*>', page)


def test_passed_init_check_keeps_its_plot_folded():
    page = render_html(report(init_check("passed")))
    assert "<svg" in page and not re.search(r'<details class="check passed"[^>]*\bopen>', page)
    assert "all checks passed" in page


def test_headline_separates_deferred_and_unanswered():
    page = render_html(report(
        CheckResult(id="a", kind="values", status="passed", score=3, max_score=3),
        CheckResult(id="speed", kind="performance", status="skipped", score=0, max_score=2,
                    message="deferred to official grading: speed"),
        CheckResult(id="q", kind="question", status="skipped", score=0, max_score=1, message="not answered")))
    assert "3 earned" in page and "2 deferred to official grading" in page and "1 unanswered" in page
    assert " lost<" not in page and "fell short" not in page


def test_student_text_is_escaped_everywhere():
    nasty = HOSTILE + ' " & \x00 \ud800'
    check = CheckResult(id="values", kind="values", status="failed", score=0, max_score=1, message=nasty,
                        title=nasty, reproduce="validator submit-build --student " + nasty, explanation=nasty,
                        review=[nasty], figures=[Histogram(title=nasty, edges=[0.0, 1.0], counts=[1],
                                                            expected=[1.0], expected_label=nasty, notes=[nasty])])
    rep = report(check, problem=nasty, notes=[nasty])
    rep.student = nasty
    page = render_html(rep)
    assert "<script" not in page.lower() and "alert(1)</" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x00" not in page and "\ud800" not in page
    page.encode("utf-8")  # lone surrogates from student output would make writing the file fail


def test_self_contained_and_deterministic():
    rep = report(init_check(below=2, above=1, on_bounds=[5, 0]))
    page = render_html(rep)
    assert page == render_html(rep)
    for outside in ("<script", "<link", "<img", "src=", "@import", "url(", 'href="http'):
        assert outside not in page
    # the figures survive the JSON report (and the batch grader's boundary) unchanged
    again = report_from_dict(json.loads(json.dumps(rep.to_dict())))
    assert render_html(again) == page


def test_extra_sections_follow_the_challenges():
    page = render_html(report(init_check()), extra_sections=[Section("Test strength", "<p>12 mutants</p>", "strength")])
    assert page.index('id="ch-token_embedding"') < page.index('<section id="strength"><h2>Test strength</h2>')


def test_write_html_and_a_path_that_cannot_be_written(tmp_path):
    from validator.submit import write_html_report

    out = tmp_path / "deep" / "report.html"
    write_html(report(init_check()), out)
    assert out.read_text(encoding="utf-8") == render_html(report(init_check()))
    buf = io.StringIO()
    console = Console(file=buf, width=200, color_system=None)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert not write_html_report(report(init_check()), str(blocker / "report.html"), console)
    assert not write_html_report(report(init_check()), str(tmp_path), console)
    text = buf.getvalue()
    assert text.count("could not write the HTML report") == 2 and "Traceback" not in text
    assert list(tmp_path.glob("*.tmp")) == []


def test_submit_build_html_on_a_broken_init(tmp_path, capsys):
    """The CLI flag end to end: the failing check and its plot in the page, the text histogram in the terminal."""
    from helpers import IMPLEMENTATIONS

    from validator.cli import main

    out = tmp_path / "report.html"
    code = main(["submit-build", "--challenge", "token_embedding", "--check", "init_distribution", "--student",
                 str(IMPLEMENTATIONS / "token_embedding" / "broken" / "init_std_002.py"), "--no-input",
                 "--seed", "3", "--profile", "quick", "--html", str(out)])
    terminal = capsys.readouterr().out
    assert code == 1
    assert "histogram: # your values, | expected" in terminal and f"HTML report: {out}" in terminal
    page = out.read_text(encoding="utf-8")
    assert re.search(r'<details class="check failed" id="check-token_embedding-init_distribution"', page)
    assert "sample std is 0.0200" in page and page.count("<svg") == 1 and len(bars(page)) == 48
