"""The class dashboard: what a whole class got wrong, as plain data (``dashboard.json``) and one page.

Built from the reports of a run (``validator grade``, or ``validator merge`` over shards):

- the score distribution of the whole catalogue and of each challenge;
- each check's failure rate, with example submissions;
- the common failure patterns, clustered by (challenge, lost checks) and named by the known bug that
  produces them (:mod:`validator.batch.signatures`), with the submissions in each;
- the class's init histograms overlaid (each init check's figure is plain data in every report);
- each question's answers: how many were right, and which wrong answers were given how often;
- the pairs of submissions whose code is most alike (:mod:`validator.batch.similarity`), with
  side-by-side views of the flagged ones;
- with ``--compare``, what the regrade changed (:mod:`validator.batch.compare`).

Rendering is :mod:`validator.reporters.dashboard`; nothing here knows HTML.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Mapping, Sequence

from validator.batch.signatures import LOST_STATUSES, Signatures, cluster

DASHBOARD_FORMAT = 1
BINS = 10
EXAMPLES = 5
MAX_OVERLAY = 200  # student lines drawn per init figure (failing ones first)
MAX_VIEWS = 20  # flagged pairs shown side by side
VIEW_CONTEXT, MAX_VIEW_LINES = 2, 300
_CHOSE = re.compile(r"^you chose (.*), the answer is (.*)$", re.S)
_ANSWERED = re.compile(r"^you answered (.*), the answer is (.*)$", re.S)


def _distribution(shares: Sequence[float], maximum: float) -> dict[str, Any]:
    bins = [0] * BINS
    for s in shares:
        bins[min(BINS - 1, max(0, int(s * BINS)))] += 1
    return {"max_score": maximum, "n": len(shares), "bins": bins,
            "mean": round(statistics.fmean(shares), 4) if shares else None,
            "median": round(statistics.median(shares), 4) if shares else None,
            "full": sum(s >= 1 - 1e-9 for s in shares), "zero": sum(s <= 1e-9 for s in shares)}


def scores(rows: Sequence[tuple[str, Any]], order: Sequence[str]) -> dict[str, Any]:
    """The distribution of the total and of each challenge, as shares of the maximum."""
    total = [r.score / r.max_score for _, r in rows if r.max_score]
    per: dict[str, list[float]] = {cid: [] for cid in order}
    maxima: dict[str, float] = {}
    for _, r in rows:
        for ch in r.challenges:
            if ch.max_score:
                per.setdefault(ch.id, []).append(ch.score / ch.max_score)
                maxima[ch.id] = max(maxima.get(ch.id, 0.0), ch.max_score)
    return {"total": _distribution(total, max((r.max_score for _, r in rows), default=0.0)),
            "challenges": {cid: _distribution(v, maxima.get(cid, 0.0)) for cid, v in per.items() if v}}


def check_rates(rows: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Each code check: how many submissions it was graded for, how many lost its points, and examples."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for name, r in rows:
        for ch in r.challenges:
            for c in ch.checks:
                if c.kind == "question":
                    continue
                entry = table.setdefault((ch.id, c.id), {"challenge": ch.id, "check": c.id, "kind": c.kind,
                                                         "title": c.title, "graded": 0, "lost": 0, "errors": 0,
                                                         "examples": []})
                entry["graded"] += 1
                if c.status in LOST_STATUSES and c.score < c.max_score:
                    entry["lost"] += 1
                    entry["errors"] += c.status == "error"
                    if len(entry["examples"]) < EXAMPLES:
                        entry["examples"].append(name)
    out = list(table.values())
    for e in out:
        e["rate"] = round(e["lost"] / e["graded"], 4) if e["graded"] else 0.0
    return out


def questions(rows: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Each question: right, unanswered, invalid, and each wrong answer with its count (from the messages)."""
    table: dict[tuple[str, str], dict[str, Any]] = {}
    for _, r in rows:
        for ch in r.challenges:
            for c in ch.checks:
                if c.kind != "question":
                    continue
                e = table.setdefault((ch.id, c.id), {"challenge": ch.id, "question": c.id, "title": c.title,
                                                     "answered": 0, "correct": 0, "unanswered": 0, "invalid": 0,
                                                     "other": 0, "key": None, "wrong": {}})
                message = (c.message or "").strip()
                if c.status == "passed":
                    e["correct"] += 1
                    e["answered"] += 1
                elif message.startswith("not answered"):
                    e["unanswered"] += 1
                elif (m := _CHOSE.match(message) or _ANSWERED.match(message)):
                    given, e["key"] = m.group(1).strip()[:80], m.group(2).strip()[:80]
                    e["wrong"][given] = e["wrong"].get(given, 0) + 1
                    e["answered"] += 1
                elif message.startswith("answer "):
                    e["invalid"] += 1
                else:
                    e["other"] += 1
    out = []
    for e in table.values():
        e["wrong"] = [{"answer": a, "count": n} for a, n in sorted(e["wrong"].items(), key=lambda kv: (-kv[1], kv[0]))]
        out.append(e)
    return out


def init_overlays(rows: Sequence[tuple[str, Any]]) -> list[dict[str, Any]]:
    """Every init check's figures, one group per (challenge, check, figure): the expected shares of the first
    report, the class's summed counts where every report binned alike, and each submission's own
    histogram (failing ones first, at most :data:`MAX_OVERLAY`)."""
    groups: dict[tuple[str, str, int], dict[str, Any]] = {}
    for name, r in rows:
        for ch in r.challenges:
            for c in ch.checks:
                for i, fig in enumerate(c.figures):
                    if not fig.counts or len(fig.edges) != len(fig.counts) + 1:
                        continue
                    g = groups.get((ch.id, c.id, i))
                    if g is None:
                        g = groups[(ch.id, c.id, i)] = {
                            "challenge": ch.id, "check": c.id, "title": fig.title, "expected_label": fig.expected_label,
                            "edges": list(fig.edges), "expected": list(fig.expected), "bounds": fig.bounds,
                            "class_counts": [0] * len(fig.counts), "class_n": 0, "same_bins": True, "students": [],
                            "failed": 0}
                    failed = c.status in LOST_STATUSES
                    g["failed"] += failed
                    if g["same_bins"] and list(fig.edges) == g["edges"]:
                        g["class_counts"] = [a + b for a, b in zip(g["class_counts"], fig.counts)]
                        g["class_n"] += fig.n
                    else:
                        g["same_bins"] = False
                    g["students"].append({"name": name, "status": c.status, "edges": list(fig.edges),
                                          "counts": list(fig.counts), "below": fig.below, "above": fig.above,
                                          "n": fig.n})
    out = []
    for g in groups.values():
        g["students"].sort(key=lambda s: (s["status"] not in LOST_STATUSES, s["name"]))
        g["drawn"] = min(len(g["students"]), MAX_OVERLAY)
        g["graded"] = len(g["students"])
        g["students"] = g["students"][:MAX_OVERLAY]
        if not g["same_bins"]:
            g["class_counts"], g["class_n"] = None, 0
        out.append(g)
    return out


def side_by_side(a, b, boilerplate: set[int]) -> dict[str, Any]:
    """The lines of two submissions that share fingerprints, with a little context, for one view."""
    from validator.batch.similarity import matched_lines

    marks = matched_lines(a, b, boilerplate)

    def blocks(doc, marked: dict[str, set[int]]) -> list[dict[str, Any]]:
        out, budget = [], MAX_VIEW_LINES
        for rel in sorted(marked):
            lines = doc.files.get(rel, "").splitlines()
            wanted = sorted({n for m in marked[rel] for n in range(m - VIEW_CONTEXT, m + VIEW_CONTEXT + 1)
                             if 1 <= n <= len(lines)})
            start = None
            for k, n in enumerate(wanted):
                if start is None:
                    start = n
                if k + 1 == len(wanted) or wanted[k + 1] != n + 1:
                    take = min(n - start + 1, budget)
                    if take > 0:
                        out.append({"file": rel, "first": start, "lines": lines[start - 1:start - 1 + take],
                                    "marked": [start + j in marked[rel] for j in range(take)]})
                    budget -= take
                    start = None
        return out

    return {"a": a.name, "b": b.name, "blocks_a": blocks(a, marks[0]), "blocks_b": blocks(b, marks[1])}


def build(rows: Sequence[tuple[str, Any]], *, order: Sequence[str] = (), signatures: Signatures | None = None,
          signature_notes: Sequence[str] = (), similarity: Any = None, docs: Mapping[str, Any] | None = None,
          boilerplate: set[int] = frozenset(), comparison: Any = None, run: Mapping[str, Any] | None = None,
          notes: Sequence[str] = ()) -> dict[str, Any]:
    """The dashboard's data for ``rows`` ((submission name, Report) pairs)."""
    rows = sorted(rows, key=lambda row: row[0])
    patterns = cluster(rows, signatures)
    data: dict[str, Any] = {
        "format": DASHBOARD_FORMAT, "submissions": len(rows), "challenges": list(order),
        "run": dict(run or {}), "notes": list(notes),
        "signatures": {"bugs": len(signatures.bugs) if signatures else 0, "notes": list(signature_notes)},
        "scores": scores(rows, order), "checks": check_rates(rows),
        "patterns": [p.to_dict() for p in patterns],
        "init": init_overlays(rows), "questions": questions(rows),
    }
    if similarity is not None:
        sim = similarity.to_dict()
        views = []
        for pair in similarity.flagged[:MAX_VIEWS]:
            if docs and pair.a in docs and pair.b in docs:
                views.append({"score": round(pair.score, 4), **side_by_side(docs[pair.a], docs[pair.b], boilerplate)})
        sim["views"] = views
        data["similarity"] = sim
    if comparison is not None:
        data["compare"] = comparison.to_dict()
    return data


def write(data: Mapping[str, Any], out, *, name: str = "dashboard", title: str = "class dashboard") -> None:
    """``out/NAME.json`` and ``out/NAME.html`` (written atomically)."""
    import json
    from pathlib import Path

    from validator.reporters import write_atomic
    from validator.reporters.dashboard import render_dashboard

    out = Path(out)
    write_atomic(out / f"{name}.json", json.dumps(data, indent=1) + "\n")
    write_atomic(out / f"{name}.html", render_dashboard(data, title=title))
