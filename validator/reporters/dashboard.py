"""The class dashboard (:mod:`validator.batch.dashboard`'s data) as one self-contained HTML page.

Inline CSS and SVG, no script, nothing fetched; the page and section helpers, the escaping and the
style sheet are the single-report page's (:mod:`validator.reporters.html`). Every string that
came from a submission (names, messages, answers, source lines) goes through :func:`esc`. Example
submissions link to their own pages, ``html/NAME.html`` beside the dashboard.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence
from urllib.parse import quote

from validator.reporters.figures import num
from validator.reporters.html import Section, anchor, esc, page, pct

CSS = """
table.dash{border-collapse:collapse;margin:.4em 0;font-size:.92em}table.dash td,table.dash th{padding:.15em .6em;text-align:left;vertical-align:top;border-bottom:1px solid #eee}
.bar{display:inline-block;height:.7em;background:#c62828;vertical-align:middle;margin-right:.4em}
.tag{display:inline-block;font-size:.78em;padding:0 .5em;border-radius:1em;border:1px solid #aaa;color:#444;margin-left:.4em}
.tag.own{border-color:#2e9e44;color:#2e7d32}.tag.knock-on{border-color:#5677c4;color:#35549a}.tag.unnamed{border-color:#d9a400;color:#8a6a00}
details.pattern{margin:.35em 0;padding:.2em .6em;border-left:5px solid #c62828;background:#fafafa}
details.pattern summary .count{font-weight:700;font-variant-numeric:tabular-nums;min-width:3em;display:inline-block}
.names a{margin-right:.5em}.muted{color:#666}
svg.mini{vertical-align:middle}svg.mini rect{fill:#4c78a8}svg.overlay text{font:11px sans-serif;fill:#444}
svg.overlay .frame{fill:#fff;stroke:#ccc}svg.overlay .expected{fill:none;stroke:#f58518;stroke-width:2.5}
svg.overlay .class{fill:none;stroke:#1d3f6e;stroke-width:2}svg.overlay .stu{fill:none;stroke-width:1;stroke-opacity:.25}
svg.overlay .stu.pass{stroke:#4c78a8}svg.overlay .stu.fail{stroke:#d62728;stroke-opacity:.6}
.sbs{display:grid;grid-template-columns:1fr 1fr;gap:.6em}.sbs pre{font-size:.8em;margin:.2em 0;overflow-x:auto}
.sbs mark{background:#ffe08a}.sbs .ln{color:#999;display:inline-block;min-width:3.2em}
.flag{color:#c62828;font-weight:700}
"""


def _link(name: str) -> str:
    if name.startswith("public:"):
        return f'<span class="muted">{esc(name)}</span>'
    return f'<a href="html/{esc(quote(name, safe=""))}.html">{esc(name)}</a>'


def _links(names: Sequence[str]) -> str:
    return '<span class="names">' + " ".join(_link(n) for n in names) + "</span>"


def _mini_bars(bins: Sequence[int], *, width: int = 160, height: int = 28) -> str:
    """A small bar chart of a distribution over equal bins (0 % on the left, 100 % on the right)."""
    if not bins or not any(bins):
        return ""
    peak, slot = max(bins), width / len(bins)
    bars = "".join(f'<rect x="{i * slot + 0.5:.1f}" y="{height - height * c / peak:.1f}" width="{slot - 1:.1f}" '
                   f'height="{height * c / peak:.1f}"><title>{i * 100 // len(bins)}-{(i + 1) * 100 // len(bins)}%: '
                   f'{c}</title></rect>' for i, c in enumerate(bins) if c)
    return (f'<svg class="mini" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="distribution">{bars}</svg>')


def _share(x: float | None) -> str:
    return "" if x is None else pct(x)


# -- sections --------------------------------------------------------------------------------------
def headline(data: Mapping[str, Any]) -> str:
    total = data.get("scores", {}).get("total", {})
    parts = [f'<span class="total">{data.get("submissions", 0)} submissions</span>']
    if total.get("n"):
        parts.append(f'<span class="verdict">mean {_share(total.get("mean"))}, median {_share(total.get("median"))}'
                     f', {total.get("full", 0)} with full marks</span>')
    run = data.get("run") or {}
    meta = " · ".join(f"{k} {esc(v)}" for k, v in run.items() if k in ("seed", "profile", "shards") and v is not None)
    failures = run.get("grader_failures") or []
    notes = [*data.get("notes", []), *data.get("signatures", {}).get("notes", [])]
    if failures:
        notes.insert(0, f"{len(failures)} grader failure(s), regrade them: {', '.join(failures[:10])}")
    note_html = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return (f'<div class="headline partial">{" ".join(parts)}<div class="meta">{meta}</div>'
            + (f'<ul class="notes">{note_html}</ul>' if note_html else "") + "</div>")


def scores_section(data: Mapping[str, Any]) -> Section:
    s = data.get("scores", {})
    rows = []
    for label, d in [("whole catalogue", s.get("total", {})), *s.get("challenges", {}).items()]:
        if not d.get("n"):
            continue
        rows.append(f'<tr><td>{esc(label)}</td><td class="num">{num(d.get("max_score", 0))}</td>'
                    f'<td class="num">{_share(d.get("mean"))}</td><td class="num">{_share(d.get("median"))}</td>'
                    f'<td class="num">{d.get("full", 0)}</td><td class="num">{d.get("zero", 0)}</td>'
                    f'<td>{_mini_bars(d.get("bins", []))}</td></tr>')
    body = ('<table class="dash"><tr><th>challenge</th><th>points</th><th>mean</th><th>median</th>'
            '<th>full marks</th><th>zero</th><th>distribution (0 → 100 %)</th></tr>' + "".join(rows) + "</table>")
    return Section("Scores", body, "scores")


def patterns_section(data: Mapping[str, Any]) -> Section:
    items = []
    for p in data.get("patterns", []):
        tag = {"own": "known bug", "knock-on": "knock-on", "unnamed": "unnamed"}.get(p["relation"], p["relation"])
        near = "".join(f'<li>closest known bug ({pct(n["similarity"])} of checks in common): {esc(n["name"])}</li>'
                       for n in p.get("near", []))
        problems = "".join(f"<li>{c}× problem: {esc(line)}</li>" for line, c in p.get("problems", {}).items())
        rest = p["submissions"][len(p["examples"]):]
        items.append(
            f'<details class="pattern" id="{anchor("pattern", p["challenge"], *p["lost"][:3])}">'
            f'<summary><span class="count">{p["count"]}</span> {esc(p["challenge"])}: {esc(p["name"])}'
            f'<span class="tag {esc(p["relation"])}">{esc(tag)}</span></summary>'
            f'<p>loses: {", ".join(f"<code>{esc(c)}</code>" for c in p["lost"])}</p>'
            + (f"<ul>{near}{problems}</ul>" if near or problems else "")
            + f'<p>examples: {_links(p["examples"])}</p>'
            + (f'<details><summary>all {p["count"]}</summary><p>{_links(rest)}</p></details>' if rest else "")
            + "</details>")
    if not items:
        items.append("<p>No submission lost a code check.</p>")
    intro = ('<p class="muted">Submissions grouped by the checks they lost on one challenge; a group is named by the '
             'known bug (mutant library, `validator strength`) that loses exactly those checks. Build the names with '
             '<code>validator signatures</code>.</p>')
    return Section("Common failure patterns", intro + "".join(items), "patterns")


def checks_section(data: Mapping[str, Any]) -> Section:
    checks = sorted(data.get("checks", []), key=lambda c: (-c["rate"], c["challenge"], c["check"]))
    lost = [c for c in checks if c["lost"]]
    rows = "".join(
        f'<tr><td>{esc(c["challenge"])}/<b>{esc(c["check"])}</b> <span class="kind">{esc(c["kind"])}</span></td>'
        f'<td class="num"><span class="bar" style="width:{max(1, round(c["rate"] * 80))}px"></span>{pct(c["rate"])}</td>'
        f'<td class="num">{c["lost"]}/{c["graded"]}</td><td class="num">{c["errors"] or ""}</td>'
        f'<td>{_links(c["examples"])}</td></tr>' for c in lost)
    body = ('<table class="dash"><tr><th>check</th><th>lost by</th><th>count</th><th>errors</th><th>examples</th></tr>'
            f"{rows}</table><p class=\"muted\">{len(checks) - len(lost)} check(s) lost by nobody.</p>")
    return Section("Checks by failure rate", body, "checks")


def overlay_svg(g: Mapping[str, Any], *, width: int = 560, height: int = 230) -> str:
    """Each submission's histogram as a density line (red: the check failed), the class's summed one and
    the expected density (orange) over the first report's bins."""
    edges, expected = g["edges"], g["expected"]
    if len(edges) < 2 or len(expected) != len(edges) - 1:
        return ""
    lo, hi = edges[0], edges[-1]
    if hi <= lo:
        return ""
    left, right, top, bottom = 44, 12, 10, 34
    pw, ph = width - left - right, height - top - bottom

    def densities(e: Sequence[float], shares: Sequence[float]) -> list[float]:
        return [s / (e[i + 1] - e[i]) if e[i + 1] > e[i] else 0.0 for i, s in enumerate(shares)]

    exp_d = densities(edges, expected)
    cap = max(exp_d, default=0.0) * 3 or 1.0
    lines = []
    for s in g.get("students", []):
        n = s.get("n") or sum(s["counts"])
        if not n or len(s["edges"]) != len(s["counts"]) + 1:
            continue
        lines.append((s["status"] in ("failed", "error"), s["edges"], densities(s["edges"], [c / n for c in s["counts"]])))
    class_d = None
    if g.get("class_counts") and g.get("class_n"):
        class_d = densities(edges, [c / g["class_n"] for c in g["class_counts"]])
    peak = min(cap, max([*exp_d, *(class_d or []), *(max(d, default=0) for _, _, d in lines)], default=1.0)) * 1.05 or 1.0

    def x(v: float) -> float:
        return left + pw * (min(max(v, lo), hi) - lo) / (hi - lo)

    def y(d: float) -> float:
        return top + ph * (1 - min(d, peak) / peak)

    def path(e: Sequence[float], d: Sequence[float]) -> str:
        pts = [f"M{x(e[0]):.1f},{y(0):.1f}"]
        for i, v in enumerate(d):
            pts.append(f"L{x(e[i]):.1f},{y(v):.1f}L{x(e[i + 1]):.1f},{y(v):.1f}")
        pts.append(f"L{x(e[-1]):.1f},{y(0):.1f}")
        return "".join(pts)

    out = [f'<svg class="overlay" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
           f'height="{height}" role="img" aria-label="{esc(g.get("title", ""))}: the class\'s histograms overlaid">',
           f'<rect class="frame" x="{left}" y="{top}" width="{pw}" height="{ph}"/>']
    out += [f'<path class="stu {"fail" if failed else "pass"}" d="{path(e, d)}"/>' for failed, e, d in lines if not failed]
    out += [f'<path class="stu fail" d="{path(e, d)}"/>' for failed, e, d in lines if failed]
    if class_d:
        out.append(f'<path class="class" d="{path(edges, class_d)}"/>')
    out.append(f'<path class="expected" d="{path(edges, exp_d)}"/>')
    for v in (lo, (lo + hi) / 2, hi):
        out.append(f'<text x="{x(v):.1f}" y="{top + ph + 14}" text-anchor="middle">{esc(num(v))}</text>')
    out.append(f'<text x="{left}" y="{height - 4}">thin: each submission (red: the check failed) · dark: the class · '
               f'orange: expected</text></svg>')
    return "".join(out)


def init_section(data: Mapping[str, Any]) -> Section:
    figs = []
    for g in data.get("init", []):
        svg = overlay_svg(g)
        if not svg:
            continue
        shown = f", {g['drawn']} drawn" if g["drawn"] < g["graded"] else ""
        figs.append(f'<figure>{svg}<figcaption>{esc(g["challenge"])}/<b>{esc(g["check"])}</b>: {esc(g["title"])}'
                    + (f" — expected: {esc(g['expected_label'])}" if g.get("expected_label") else "")
                    + f'<br>{g["graded"]} submissions, {g["failed"]} failed{shown}</figcaption></figure>')
    return Section("Initialisation, the whole class", "".join(figs) or "<p>No init figures in these reports.</p>", "init")


def questions_section(data: Mapping[str, Any]) -> Section:
    rows = []
    for q in data.get("questions", []):
        total = q["answered"] + q["unanswered"] + q["invalid"] + q["other"]
        wrong = ", ".join(f'<code>{esc(w["answer"])}</code> × {w["count"]}' for w in q["wrong"][:8])
        rows.append(f'<tr><td>{esc(q["challenge"])}/<b>{esc(q["question"])}</b><br><span class="muted">'
                    f'{esc(q["title"])}</span></td><td class="num">{q["correct"]}/{total}</td>'
                    f'<td>{wrong}</td><td class="num">{q["unanswered"] or ""}</td><td class="num">{q["invalid"] or ""}</td>'
                    f'<td>{esc(q["key"]) if q.get("key") is not None else ""}</td></tr>')
    body = ('<table class="dash"><tr><th>question</th><th>right</th><th>wrong answers</th><th>unanswered</th>'
            '<th>invalid</th><th>key</th></tr>' + "".join(rows) + "</table>") if rows else "<p>No questions graded.</p>"
    return Section("Questions", body, "questions")


def _block_html(block: Mapping[str, Any]) -> str:
    lines = []
    for j, (text, marked) in enumerate(zip(block["lines"], block["marked"])):
        line = f'<span class="ln">{block["first"] + j}</span>{esc(text)}'
        lines.append(f"<mark>{line}</mark>" if marked else line)
    return f'<p class="muted">{esc(block["file"])}</p><pre>' + "\n".join(lines) + "</pre>"


def similarity_section(data: Mapping[str, Any]) -> Section | None:
    sim = data.get("similarity")
    if sim is None:
        return None
    hist = sim.get("histogram", [])
    rows = "".join(f'<tr><td class="num{" flag" if p["score"] >= sim["threshold"] else ""}">{pct(p["score"])}</td>'
                   f'<td>{_link(p["a"])}</td><td>{_link(p["b"])}</td><td class="num">{p["shared"]}</td></tr>'
                   for p in sim.get("pairs", [])[:60])
    views = "".join(
        f'<details class="pattern"><summary><span class="count">{pct(v["score"])}</span> {esc(v["a"])} ↔ {esc(v["b"])}'
        f'</summary><div class="sbs"><div>{"".join(map(_block_html, v["blocks_a"]))}</div>'
        f'<div>{"".join(map(_block_html, v["blocks_b"]))}</div></div></details>' for v in sim.get("views", []))
    notes = "".join(f"<li>{esc(n)}</li>" for n in sim.get("notes", []))
    body = (f'<p class="muted">Evidence for a person, never a grade change. {esc(sim.get("method", ""))}. '
            f'{sim.get("compared", 0)} pairs compared; {sim.get("flagged", 0)} at or above {pct(sim["threshold"])}.</p>'
            + (f"<ul>{notes}</ul>" if notes else "")
            + f'<p>every pair\'s score (0 → 100 %): {_mini_bars(hist, width=300, height=40)}</p>'
            + '<table class="dash"><tr><th>score</th><th>submission</th><th>submission</th><th>shared fingerprints</th></tr>'
            + rows + "</table>" + (f"<h3>Side by side (flagged pairs)</h3>{views}" if views else ""))
    return Section("Similar code", body, "similarity")


def compare_section(data: Mapping[str, Any]) -> Section | None:
    c = data.get("compare")
    if c is None:
        return None
    diffs = "".join(f"<li>{esc(d)}</li>" for d in c.get("run_differences", [])) or "<li>none recorded</li>"
    reasons = "".join(f'<tr><td class="num">{n}</td><td>{esc(r)}</td></tr>' for r, n in c.get("reasons", {}).items())
    students = []
    for s in c.get("students", []):
        old, new = s["old"], s["new"]
        moved = "".join(f'<li><code>{esc(x["challenge"])}/{esc(x["check"])}</code>: '
                        f'{esc(_verdict(x["old"]))} → {esc(_verdict(x["new"]))} — {esc("; ".join(x["why"]))}</li>'
                        for x in s["checks"][:40])
        kept = ' <span class="flag">kept the previous grade (--no-lowering)</span>' if s.get("kept_previous") else ""
        students.append(f'<details class="pattern"><summary>{esc(s["name"])}: {_score(old)} → {_score(new)} '
                        f'({esc(s["direction"])}){kept}</summary><ul>{moved}</ul></details>')
    body = (f'<p>{c.get("changed", 0)} submission(s) changed, {c.get("unchanged", 0)} unchanged, against '
            f'<code>{esc(c.get("previous", ""))}</code>.'
            + (f' --no-lowering kept the previous grade for {len(c.get("kept_previous", []))}.' if c.get("no_lowering") else "")
            + f"</p><p>What differs between the runs:</p><ul>{diffs}</ul>"
            + (f'<table class="dash"><tr><th>verdicts</th><th>explained by</th></tr>{reasons}</table>' if reasons else "")
            + "".join(students))
    return Section("Regrade: what changed", body, "compare")


def _verdict(v: Mapping[str, Any] | None) -> str:
    return "absent" if v is None else f"{v['status']} {num(v['score'])}/{num(v['max_score'])}"


def _score(v: Mapping[str, Any]) -> str:
    return "absent" if v.get("score") is None else f"{num(v['score'])}/{num(v['max_score'])}"


def render_dashboard(data: Mapping[str, Any], *, title: str = "class dashboard") -> str:
    sections = [scores_section(data), patterns_section(data), checks_section(data), init_section(data),
                questions_section(data), similarity_section(data), compare_section(data)]
    return page(title, [s for s in sections if s is not None], headline=headline(data), css=CSS)
