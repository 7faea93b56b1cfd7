"""The whole report as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

Every piece of text from a result (messages hold the student's exception text and answers) goes
through :func:`esc`. The page is a list of :class:`Section` s; another report (a test-strength
summary, say) adds its own with ``render_html(report, extra_sections=[...])`` or builds a page of
its own with :func:`page`. Same result, same bytes: nothing here reads the clock or the machine.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from validator.reporters import write_atomic
from validator.reporters.figures import bound_notes, num
from validator.reporters.terminal import (
    BREAKDOWN_LABELS,
    breakdown,
    check_counts,
    verdict,
)
from validator.results import ChallengeResult, CheckResult, Histogram, Report

# What HTML cannot carry: C0/C1 controls other than tab and newlines, lone surrogates, non-characters.
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufdd0-\ufdef\ufffe\uffff]")
_ANCHOR = re.compile(r"[^A-Za-z0-9_-]")
STATUS_WORDS = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP", "advisory": "ADVICE"}


def esc(text: object) -> str:
    """Text as HTML: markup characters escaped, characters HTML cannot carry replaced by U+FFFD."""
    return html.escape(_UNSAFE.sub("\ufffd", str(text)), quote=True)


def anchor(*parts: str) -> str:
    return "-".join(_ANCHOR.sub("_", p) for p in parts)


@dataclass(frozen=True)
class Section:
    """One part of the page: a heading and a body that is already HTML (build it with :func:`esc`)."""

    title: str
    body: str
    anchor: str = ""


# -- the histogram as SVG --------------------------------------------------------------------------

def svg_histogram(h: Histogram, *, width: int = 560, height: int = 220) -> str:
    """Bars: the sample's share per bin (values beyond the bins in their own bars at either end,
    coloured apart); a line: the share the expected distribution puts there; dashed: its bounds."""
    n = h.n
    bins = len(h.counts)
    if n == 0 or bins == 0 or len(h.edges) != bins + 1 or len(h.expected) != bins:
        return ""
    left, right, top, bottom = 52, 26, 14, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    # slots: [below, gap] + bins + [gap, above]
    extra_lo, extra_hi = (2 if h.below else 0), (2 if h.above else 0)
    slot = plot_w / (bins + extra_lo + extra_hi)
    shares = [c / n for c in h.counts]
    peak = max(max(shares), max(h.expected), h.below / n, h.above / n,
               h.expected_below if h.below else 0.0, h.expected_above if h.above else 0.0, 1e-12) * 1.08

    def y(share: float) -> float:
        return top + plot_h * (1 - share / peak)

    def x_of(slot_index: float) -> float:
        return left + slot * slot_index

    out = [f'<svg class="hist" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{esc(_summary(h))}">']
    out.append(f'<rect class="frame" x="{left}" y="{top}" width="{plot_w}" height="{plot_h}"/>')
    for frac in (0.5, 1.0):  # gridlines, labelled with the share they stand for
        gy = y(peak / 1.08 * frac)
        out.append(f'<line class="grid" x1="{left}" y1="{gy:.2f}" x2="{left + plot_w}" y2="{gy:.2f}"/>'
                   f'<text class="tick" x="{left - 4}" y="{gy + 4:.2f}" text-anchor="end">'
                   f'{peak / 1.08 * frac:.1%}</text>')

    def bar(i_slot: int, share: float, exp: float, cls: str, label: str) -> None:
        x0, y0 = x_of(i_slot), y(share)
        out.append(f'<rect class="{cls}" x="{x0 + 0.5:.2f}" y="{y0:.2f}" width="{max(slot - 1, 0.5):.2f}" '
                   f'height="{top + plot_h - y0:.2f}"><title>{esc(label)}: {pct(share)} of your values, '
                   f'{pct(exp)} expected</title></rect>')

    first = extra_lo
    for count, exp, i_slot, label in ((h.below, h.expected_below, 0, f"below {num(h.edges[0])}"),
                                      (h.above, h.expected_above, first + bins + 1, f"above {num(h.edges[-1])}")):
        if count:
            bar(i_slot, count / n, exp, "bar outside" if _too_many(count / n, exp, h) else "bar beyond", label)
    for i, share in enumerate(shares):
        bar(first + i, share, h.expected[i],
            "bar", f"[{num(h.edges[i])}, {num(h.edges[i + 1])}{']' if i == bins - 1 else ')'}")
    for count, exp, x, side in ((h.below, h.expected_below, x_of(first) + 4, "start"),
                                (h.above, h.expected_above, x_of(first + bins) - 4, "end")):
        if count:  # mass beyond the bins is often a sliver: say how much
            words = f"{pct(count / n)} outside" if h.bounds else f"{pct(count / n)} beyond"
            out.append(f'<text class="{"atom" if _too_many(count / n, exp, h) else "tick"}" x="{x:.2f}" '
                       f'y="{top + 26}" text-anchor="{side}">{esc(words)}</text>')
    # the expected shares, as a step line over the bins (and a level over each bar beyond them)
    steps = [f"M{x_of(first):.2f},{y(0):.2f}"]
    for i, exp in enumerate(h.expected):
        steps.append(f"L{x_of(first + i):.2f},{y(exp):.2f}L{x_of(first + i + 1):.2f},{y(exp):.2f}")
    steps.append(f"L{x_of(first + bins):.2f},{y(0):.2f}")
    out.append(f'<path class="expected" d="{"".join(steps)}"/>')
    for present, i_slot, exp in ((h.below, 0, h.expected_below), (h.above, first + bins + 1, h.expected_above)):
        if present:
            out.append(f'<path class="expected" d="M{x_of(i_slot):.2f},{y(exp):.2f}H{x_of(i_slot + 1):.2f}"/>')
    if h.bounds:
        for i_slot in (first, first + bins):
            bx = x_of(i_slot)
            out.append(f'<line class="bound" x1="{bx:.2f}" y1="{top}" x2="{bx:.2f}" y2="{top + plot_h}"/>')
        for side, (i_slot, count) in enumerate(zip((first, first + bins), h.on_bounds or [])):
            if count:  # values piled exactly on a bound: clamping, which the bars alone barely show
                bx = x_of(i_slot)
                out.append(f'<path class="atom" d="M{bx - 6:.2f},{top + 2}H{bx + 6:.2f}L{bx:.2f},{top + 12}Z"/>'
                           f'<line class="atom" x1="{bx:.2f}" y1="{top + 12}" x2="{bx:.2f}" y2="{top + plot_h}"/>'
                           f'<text class="atom" x="{bx + (8 if side == 0 else -8):.2f}" y="{top + 11}" '
                           f'text-anchor="{"start" if side == 0 else "end"}">{count} on the bound</text>')

    base = top + plot_h + 14
    for i in sorted({0, bins // 4, bins // 2, 3 * bins // 4, bins}):
        out.append(f'<text class="tick" x="{x_of(first + i):.2f}" y="{base}" text-anchor="middle">'
                   f'{esc(num(h.edges[i]))}</text>')
    out.append(f'<text class="legend" x="{left}" y="{height - 6}">bars: your {n} values'
               f'{_outside_legend(h)} · line: expected'
               f'{" · dashed: bounds" if h.bounds else ""}</text>')
    out.append("</svg>")
    return "".join(out)


def pct(share: float) -> str:
    """A share as a percentage that never rounds a few values to 0."""
    if share == 0 or share >= 0.001:
        return f"{share:.1%}"
    return f"{share * 100:.2g}%"


def _too_many(share: float, expected: float, h: Histogram) -> bool:
    """Red: anything beyond a finite support, or clearly more than a normal's tails hold beyond ± 4 std."""
    return bool(h.bounds) or share > 2 * expected + 0.001


def _outside_legend(h: Histogram) -> str:
    if not (h.below or h.above):
        return ""
    return " (at the ends: outside the bounds)" if h.bounds else " (at the ends: beyond the drawn range)"


def _summary(h: Histogram) -> str:
    outside = (h.below + h.above) / h.n if h.n else 0.0
    return (f"histogram of {h.n} values against {h.expected_label or 'the expected distribution'}"
            + (f"; {outside:.1%} outside [{num(h.edges[0])}, {num(h.edges[-1])}]" if outside else ""))


def figure_html(h: Histogram) -> str:
    svg = svg_histogram(h)
    if not svg:
        return ""
    caption = esc(h.title) + (f" — expected: {esc(h.expected_label)}" if h.expected_label else "")
    notes = "".join(f"<br>{esc(note)}" for note in [*bound_notes(h), *h.notes])
    return f'<figure>{svg}<figcaption>{caption}{notes}</figcaption></figure>'


# -- the report --------------------------------------------------------------------------------------

def headline_html(report: Report) -> str:
    parts = breakdown(report)
    tone, words = verdict(report, parts)
    chips = "".join(f'<span class="chip {key}">{parts[key]:g} {esc(label)}</span>'
                    for key, label in BREAKDOWN_LABELS if key == "earned" or parts[key] > 0)
    return (f'<div class="headline {tone}"><span class="total">total {report.score:g}/{report.max_score:g}</span>'
            f' <span class="verdict">{esc(words)}</span><div class="chips">{chips}</div>'
            f'<div class="meta">student {esc(report.student)} · profile {esc(report.profile)} · '
            f'seed {report.seed} · {report.duration_s:.1f} s</div></div>')


def summary_section(report: Report) -> Section:
    rows = []
    for ch in report.challenges:
        detail = check_counts(ch)
        tone, _ = verdict(Report(challenges=[ch], seed=report.seed, student=report.student, profile=report.profile))
        rows.append(f'<tr class="{tone}"><td><a href="#{anchor("ch", ch.id)}">{esc(ch.id)}</a></td>'
                    f'<td class="num">{ch.score:g}/{ch.max_score:g}</td><td>{esc(detail)}</td></tr>')
    notes = "".join(f"<li>{esc(n)}</li>" for n in report.notes)
    body = (f'<table class="summary"><tr><th>challenge</th><th>points</th><th>checks</th></tr>{"".join(rows)}'
            f'</table>' + (f'<ul class="notes">{notes}</ul>' if notes else ""))
    return Section("Summary", body, "summary")


def check_html(ch: ChallengeResult, c: CheckResult) -> str:
    word = STATUS_WORDS.get(c.status, c.status.upper())
    # what needs reading is open; a pass (and its picture) is a click away
    is_open = " open" if c.status in ("failed", "error", "advisory") else ""
    parts = [f'<details class="check {esc(c.status)}" id="{anchor("check", ch.id, c.id)}"{is_open}>'
             f'<summary><span class="status">{esc(word)}</span> <b>{esc(c.id)}</b> '
             f'<span class="kind">{esc(c.kind)}</span> <span class="points">{c.score:g}/{c.max_score:g}</span> '
             f'<span class="title">{esc(c.title)}</span></summary>']
    if c.message:
        parts.append(f"<pre>{esc(c.message)}</pre>")
    parts.extend(figure_html(f) for f in c.figures)
    if c.explanation:
        parts.append(f'<p class="why">why: {esc(c.explanation.strip())}</p>')
    if c.review:
        parts.append(f'<p class="review">marked for review: {esc("; ".join(c.review))}</p>')
    if c.reproduce and c.kind != "question":
        parts.append(f'<p class="reproduce">reproduce: <code>{esc(c.reproduce)}</code></p>')
    parts.append("</details>")
    return "".join(parts)


def challenge_section(ch: ChallengeResult) -> Section:
    problem = f'<p class="problem">problem: {esc(ch.problem)}</p>' if ch.problem else ""
    body = problem + "".join(check_html(ch, c) for c in ch.checks)
    return Section(f"{ch.id}: {ch.title} [{ch.score:g}/{ch.max_score:g}]", body, anchor("ch", ch.id))


def report_sections(report: Report) -> list[Section]:
    return [summary_section(report), *(challenge_section(ch) for ch in report.challenges)]


CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:62em;padding:0 1em;color:#1d1d1f}
h1{font-size:1.4em;margin-bottom:.3em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
.headline{padding:.8em 1em;border-radius:6px;border-left:6px solid}
.headline.good{background:#eefaf0;border-color:#2e9e44}.headline.partial{background:#fff8e6;border-color:#d9a400}
.headline.short{background:#fdeeee;border-color:#c62828}
.total{font-size:1.5em;font-weight:700}.verdict{font-size:1.1em;margin-left:.5em}
.chips{margin:.4em 0}.chip{display:inline-block;padding:.1em .6em;margin-right:.4em;border-radius:1em;background:#fff;border:1px solid #ccc}
.chip.earned{border-color:#2e9e44}.chip.deferred{border-color:#5677c4}.chip.unanswered{border-color:#d9a400}
.chip.lost{border-color:#c62828}.meta{color:#555;font-size:.9em}
table.summary{border-collapse:collapse}table.summary td,table.summary th{padding:.2em .8em;text-align:left}
table.summary tr.short td:first-child{border-left:4px solid #c62828}table.summary tr.partial td:first-child{border-left:4px solid #d9a400}table.summary tr.good td:first-child{border-left:4px solid #2e9e44}
.num{text-align:right;font-variant-numeric:tabular-nums}
details.check{margin:.3em 0;padding:.2em .6em;border-radius:4px;border-left:5px solid #bbb;background:#fafafa}
details.check.passed{border-color:#2e9e44}details.check.failed,details.check.error{border-color:#c62828;background:#fff6f6}
details.check.skipped{border-color:#d9a400}details.check.advisory{border-color:#d9a400;background:#fffcf0}
summary{cursor:pointer}.status{font-weight:700;display:inline-block;min-width:4.2em}
.failed .status,.error .status{color:#c62828}.passed .status{color:#2e7d32}.skipped .status,.advisory .status{color:#a67c00}
.kind{color:#666;font-size:.85em}.points{font-variant-numeric:tabular-nums;margin:0 .4em}.title{color:#444}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #e3e3e3;padding:.5em;font-size:.88em}
code{font-size:.9em;background:#eef2f8;padding:.1em .3em;word-break:break-all}
.problem,.review{color:#c62828;font-weight:600}.why{color:#333}
figure{margin:.5em 0}figcaption{font-size:.85em;color:#444}
.passed svg.hist{width:380px;height:auto}
svg.hist .frame{fill:#fff;stroke:#ccc}svg.hist .grid{stroke:#eee}svg.hist .bar{fill:#4c78a8}
svg.hist .bar.outside{fill:#d62728}svg.hist .bar.beyond{fill:#8da9c9}svg.hist .expected{fill:none;stroke:#f58518;stroke-width:2}
svg.hist .bound{stroke:#555;stroke-dasharray:4 3}svg.hist path.atom{fill:#d62728}
svg.hist line.atom{stroke:#d62728;stroke-width:2}svg.hist text.atom{fill:#d62728;font-weight:700}svg.hist text{font:11px sans-serif;fill:#444}
"""


def page(title: str, sections: Sequence[Section], *, headline: str = "", css: str = "") -> str:
    """A complete HTML document: the headline (HTML), then each section under its heading; ``css`` is
    appended to the page's style sheet (another page's own rules)."""
    body = []
    for s in sections:
        ident = f' id="{esc(s.anchor)}"' if s.anchor else ""
        body.append(f"<section{ident}><h2>{esc(s.title)}</h2>\n{s.body}\n</section>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}{css}</style></head>\n<body>\n<h1>{esc(title)}</h1>\n"
            f"{headline}\n" + "\n".join(body) + "\n</body></html>\n")


def render_html(report: Report, *, extra_sections: Sequence[Section] = (), title: str = "validator report") -> str:
    """The report as one HTML document; ``extra_sections`` go after the challenges."""
    return page(title, [*report_sections(report), *extra_sections], headline=headline_html(report))


def write_html(report: Report, path: str | Path, **kwargs) -> None:
    """Write the page atomically (a reader never sees half a file)."""
    write_atomic(path, render_html(report, **kwargs))
