"""Figures of a check (plain data on its result) as lines of text, for every text reporter.

The terminal, the pytest plugin, Gradescope and JUnit draw the same picture from the same
data; the HTML report draws it as SVG (``validator.reporters.html``).
"""

from __future__ import annotations

from typing import Sequence

from validator.results import Histogram

HEADER = "histogram: # your values, | expected"


def num(x: float, digits: int = 3) -> str:
    """A number as a person writes it: 0 where it is 0 up to rounding."""
    if x != x or x in (float("inf"), float("-inf")):
        return str(x)
    return "0" if abs(x) < 1e-12 else f"{x:.{digits}g}"


def merged(h: Histogram, rows: int) -> tuple[list[float], list[int], list[float]]:
    """(edges, counts, expected) with adjacent bins added up to ``rows`` bins, where they divide evenly."""
    bins = len(h.counts)
    group = bins // rows if rows and bins > rows and bins % rows == 0 else 1
    counts = [sum(h.counts[i:i + group]) for i in range(0, bins, group)]
    expected = [sum(h.expected[i:i + group]) for i in range(0, bins, group)]
    return h.edges[::group], counts, expected


def text_histogram(h: Histogram, *, rows: int = 12, width: int = 40) -> list[str]:
    """One line per bin: ``#`` bars are the sample's share, ``|`` marks the expected share.

    Values beyond the bins get a line of their own at either end (``< lo``, ``> hi``).
    """
    n = h.n
    if n == 0 or len(h.edges) != len(h.counts) + 1:
        return []
    edges, counts, expected = merged(h, rows)
    observed = [c / n for c in counts]
    below, above = h.below / n, h.above / n
    top = max(max(observed), max(expected, default=0.0), below, above, 1e-12)

    def bar(obs: float, exp: float) -> str:
        cells = ["#" if i < round(obs / top * width) else " " for i in range(width)]
        if exp > 0:
            cells[min(width - 1, round(exp / top * width))] = "|"
        return "".join(cells).rstrip()

    lines = []
    if h.below:
        lines.append(f"{'< ' + num(edges[0]):>12}  {bar(below, h.expected_below)}  {below:6.1%}")
    for i, share in enumerate(observed):
        lines.append(f"{num(edges[i]):>12}  {bar(share, expected[i])}  {share:6.1%}")
    if h.above:
        lines.append(f"{'> ' + num(edges[-1]):>12}  {bar(above, h.expected_above)}  {above:6.1%}")
    return lines


def bound_notes(h: Histogram) -> list[str]:
    """A sentence per bound that values sit exactly on (a continuous sampler puts almost none there)."""
    if not h.bounds or not h.on_bounds:
        return []
    return [f"{count} of your values sit exactly on the bound {num(bound, 6)}"
            for bound, count in zip(h.bounds, h.on_bounds) if count]


def figure_lines(figures: Sequence[Histogram], *, indent: str = "  ") -> list[str]:
    """Every figure of a check as text: a header naming both sides, then the bars."""
    out = []
    for fig in figures:
        bars = text_histogram(fig)
        if not bars:
            continue
        out.append(indent + HEADER + (f" ({fig.expected_label})" if fig.expected_label else ""))
        out.extend(bars)
        out.extend(indent + line for line in bound_notes(fig))
        out.extend(indent + note for note in fig.notes)
    return out
