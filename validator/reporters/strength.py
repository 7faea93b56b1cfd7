"""Render a `validator strength` report (validator.instructor.strength.StrengthReport): terminal text, JSON, HTML."""

from __future__ import annotations

import json
from pathlib import Path

from validator.reporters import write_atomic


def write_json(report, path: str | Path) -> None:
    """The report as plain data (``StrengthReport.to_dict``), self-contained: diffs, reasons and hints included."""
    write_atomic(path, json.dumps(report.to_dict(), indent=2) + "\n")


def _indent(text: str, pad: str = "      ") -> str:
    return "".join(pad + line for line in text.splitlines(True))


def render_text(report) -> str:
    lines = [f"strength report (seed {report.seed}, profile {report.profile}, {report.seconds:.0f} s)"]
    for ch in report.challenges:
        live = ch.mutants - ch.equivalent - ch.errors
        lines.append("")
        lines.append(f"{ch.id}: {ch.caught}/{live} non-equivalent mutants caught ({ch.score:.1%}); "
                     f"{ch.survived} survived, {ch.equivalent} marked equivalent"
                     + (f", {ch.errors} not graded (grader error)" if ch.errors else "")
                     + f"; {ch.graded} graded now, {ch.mutants - ch.graded - ch.errors} from the cache")
        lines += _family_lines(ch)
        for r in ch.results:
            if r.status == "survived":
                lines.append(f"  SURVIVED {r.id}" + (" (bug class)" if r.family == "bug-class" else ""))
                lines.append(_indent(r.diff.rstrip("\n") + "\n"))
                for need in r.needs:
                    lines.append(f"      needs: {need}")
            elif r.status == "error":
                lines.append(f"  NOT GRADED {r.id}: {r.message.strip().splitlines()[-1] if r.message.strip() else ''}")
        equivalents = [r for r in ch.results if r.status == "equivalent"]
        if equivalents:
            lines.append("  equivalent (marked in the spec): " + ", ".join(r.id for r in equivalents))
        if ch.catches:
            label = "catches" if ch.all_checks else "first catches"
            lines.append(f"  {label}: " + ", ".join(f"{k} {v}" for k, v in
                                                    sorted(ch.catches.items(), key=lambda kv: -kv[1])))
        if ch.all_checks:
            lines.append("  dead weight (caught nothing): " + (", ".join(ch.dead_weight) or "none"))
            lines.append("  blast radius (caught >= 80% of the caught mutants): " + (", ".join(ch.blast_radius) or "none"))
        for w in ch.warnings:
            lines.append(f"  warning: {w}")
    for note in report.notes:
        lines.append(f"note: {note}")
    total = sum(c.mutants for c in report.challenges)
    lines.append("")
    per_family = report.families
    if per_family.get("bug-class", {}).get("mutants"):
        lines.append("by family: " + "; ".join(f"{family} {_caught_of(counts)}" for family, counts in per_family.items()))
    lines.append(f"{total} mutants: {sum(c.caught for c in report.challenges)} caught, {report.survived} survived, "
                 f"{sum(c.equivalent for c in report.challenges)} equivalent"
                 + (" -- every non-equivalent mutant is caught" if not report.survived else
                    " -- mark a survivor equivalent (strength.equivalent in the spec, with a reason) only if it "
                    "cannot change behaviour; otherwise add the check it needs"))
    return "\n".join(lines) + "\n"


def _caught_of(counts: dict) -> str:
    live = counts.get("mutants", 0) - counts.get("equivalent", 0) - counts.get("errors", 0)
    text = f"{counts.get('caught', 0)}/{live} caught"
    if counts.get("equivalent"):
        text += f", {counts['equivalent']} equivalent"
    return text


def _family_lines(ch) -> list[str]:
    """One line per family: the one-point mutants, and the bug-class ones with a count per operator."""
    families = getattr(ch, "families", None) or {}
    if not families.get("bug-class", {}).get("mutants"):
        return []
    lines = [f"  one-point mutants: {_caught_of(families.get('one-point', {}))}"]
    per = "; ".join(f"{op} {_caught_of(c)}" for op, c in ch.bug_classes.items())
    lines.append(f"  bug-class mutants: {_caught_of(families['bug-class'])} ({per})")
    return lines


# -- HTML ---------------------------------------------------------------------------------------
def html_sections(report) -> list:
    """The strength report as sections of a validator HTML page (validator/reporters/html.py)."""
    from validator.reporters.html import Section, anchor, esc

    rows = []
    for ch in report.challenges:
        live = ch.mutants - ch.equivalent - ch.errors
        families = getattr(ch, "families", None) or {}
        rows.append(f"<tr><td><a href=\"#{esc(anchor('strength', ch.id))}\">{esc(ch.id)}</a></td>"
                    f"<td>{ch.caught}/{live}</td><td>{ch.score:.1%}</td><td>{ch.survived}</td>"
                    f"<td>{ch.equivalent}</td><td>{ch.errors}</td>"
                    f"<td>{esc(_caught_of(families.get('one-point', {})))}</td>"
                    f"<td>{esc(_caught_of(families.get('bug-class', {})))}</td></tr>")
    summary = ("<table><tr><th>challenge</th><th>caught</th><th>score</th><th>survived</th><th>equivalent</th>"
               "<th>not graded</th><th>one-point</th><th>bug-class</th></tr>" + "".join(rows) + "</table>"
               + "".join(f"<p class=\"note\">{esc(n)}</p>" for n in report.notes))
    sections = [Section(f"Grader strength (seed {report.seed}, profile {report.profile})", summary,
                        anchor("strength"))]
    for ch in report.challenges:
        parts = []
        for r in ch.results:
            if r.status == "survived":
                needs = "".join(f"<li>{esc(n)}</li>" for n in r.needs)
                family = " (bug class)" if getattr(r, "family", "") == "bug-class" else ""
                parts.append(f"<details open><summary>SURVIVED {esc(r.id)}{family}</summary><pre>{esc(r.diff)}</pre>"
                             + (f"<ul>{needs}</ul>" if needs else "") + "</details>")
            elif r.status == "error":
                parts.append(f"<details><summary>NOT GRADED {esc(r.id)}</summary><pre>{esc(r.message)}</pre>"
                             "</details>")
        equivalents = [r for r in ch.results if r.status == "equivalent"]
        if equivalents:
            items = "".join(f"<li><code>{esc(r.id)}</code>: {esc(r.reason)}</li>" for r in equivalents)
            parts.append(f"<details><summary>{len(equivalents)} marked equivalent in the spec</summary>"
                         f"<ul>{items}</ul></details>")
        family_lines = _family_lines(ch)
        if family_lines:
            parts.append("<p>" + "<br>".join(esc(line.strip()) for line in family_lines) + "</p>")
        if ch.catches:
            label = "catches" if ch.all_checks else "first catches"
            caught = ", ".join(f"{esc(k)} {v}" for k, v in sorted(ch.catches.items(), key=lambda kv: -kv[1]))
            parts.append(f"<p>{label}: {caught}</p>")
        if ch.all_checks:
            parts.append(f"<p>dead weight (caught nothing): {esc(', '.join(ch.dead_weight) or 'none')}</p>"
                         f"<p>blast radius: {esc(', '.join(ch.blast_radius) or 'none')}</p>")
        parts += [f"<p class=\"note\">warning: {esc(w)}</p>" for w in ch.warnings]
        live = ch.mutants - ch.equivalent - ch.errors
        sections.append(Section(f"{ch.id}: {ch.caught}/{live} caught ({ch.score:.1%})",
                                "\n".join(parts) or "<p>every non-equivalent mutant is caught</p>",
                                anchor("strength", ch.id)))
    return sections


def write_html(report, path) -> None:
    """The strength report as one self-contained HTML page."""
    from validator.reporters.html import page

    write_atomic(path, page("validator strength", html_sections(report)))
