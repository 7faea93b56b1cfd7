"""The submission report a student reads in the terminal."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from validator.reporters.figures import figure_lines
from validator.reporters.sanitize import one_line, safe, safe_report
from validator.results import ChallengeResult, CheckResult, Report

ICONS = {"passed": "[green]PASS[/]", "failed": "[red]FAIL[/]", "error": "[red]ERROR[/]",
         "skipped": "[yellow]SKIP[/]", "advisory": "[yellow]ADVICE[/]"}


def _points(score: float, max_score: float) -> str:
    return f"{score:g}/{max_score:g}"


def reproduce_run(*, seed: int, profile: str, student: str | None, challenges: list[str],
                  device: str | None = None, checks: list[str] | None = None, map_arg: str | None = None) -> str:
    """The command that replays this run: same file, seed, profile, device and selection."""
    from shlex import quote

    return (f"validator submit-build --seed {seed} --profile {quote(profile)}"
            + (f" --student {quote(student)}" if student else "")
            + (f" --map {quote(map_arg)}" if map_arg else "")
            + "".join(f" --challenge {quote(c)}" for c in challenges)
            + "".join(f" --check {quote(c)}" for c in checks or [])
            + (f" --device {quote(device)}" if device else ""))


def render_header(console: Console, *, seed: int, profile: str, student: str, challenges: list[str],
                  device: str | None = None, student_arg: str | None = None, checks: list[str] | None = None,
                  map_arg: str | None = None) -> None:
    console.print(f"[bold]submit-build[/] · student {escape(one_line(student))} · profile {escape(one_line(profile))} "
                  f"· seed {seed}" + (f" · your layers on {escape(one_line(device))}" if device else ""), soft_wrap=True)
    command = reproduce_run(seed=seed, profile=profile, student=student_arg or student, challenges=challenges,
                            device=device, checks=checks, map_arg=map_arg)
    # soft_wrap: never broken into lines at the terminal width, so the command survives copy-paste
    console.print(f"  reproduce this run: [cyan]{escape(one_line(command))}[/]", soft_wrap=True)


def render_answer_formats(console: Console, formats: dict[str, list[tuple[str, str, str | None]]]) -> None:
    """Before grading: each challenge's answers as valid / invalid / missing (formats only, no key needed)."""
    for challenge, rows in safe(formats).items():
        if not rows:
            continue
        counts = {s: sum(1 for _, status, _ in rows if status == s) for s in ("valid", "invalid", "missing")}
        colour = "red" if counts["invalid"] else "yellow" if counts["missing"] else "green"
        console.print(f"  answers {escape(challenge)}: [{colour}]" + ", ".join(f"{n} {s}" for s, n in counts.items())
                      + "[/]")
        for qid, status, why in rows:
            if status == "invalid":
                console.print(f"    [red]invalid[/] {escape(qid)}: {escape(why or '')}")


def render_numbers(console: Console, challenges: list, student: str | None) -> None:
    """Before grading: the numbers of each question drawn per student, for ``student`` (or, without an id,
    the examples), and how to set the id official grading draws from."""
    from validator.questions import draw, numbers_text

    rows = [(ch.id, q.id, numbers_text(draw(ch.id, q, student))) for ch in challenges for q in ch.questions
            if q.params]
    if not rows:
        return
    if student:
        console.print(f"  your numbers (student id {escape(one_line(student))}):")
    else:
        console.print("  [yellow]no student id set[/]: these are the example numbers; official grading draws "
                      "yours from your id. Set it once: [cyan]validator submit-build --student-id YOUR_ID[/] "
                      "(on Gradescope, the email you submit with)", soft_wrap=True)
    for cid, qid, numbers in rows:
        console.print(f"    {escape(cid)}.{escape(qid)}: {escape(numbers)}")


def render_challenge(console: Console, result: ChallengeResult) -> None:
    result = safe(result)  # student text shown, never acted on (escape sequences, CR, BS)
    table = Table(title=f"{escape(result.id)}: {escape(result.title)}  [{_points(result.score, result.max_score)}]",
                  title_justify="left", show_lines=False, expand=False)
    table.add_column("", no_wrap=True)
    table.add_column("check")
    table.add_column("kind")
    table.add_column("points", justify="right")
    for c in result.checks:
        table.add_row(ICONS.get(c.status, escape(c.status)), escape(c.id), escape(c.kind), _points(c.score, c.max_score))
    console.print(table)
    for entry, where in result.implementations.items():
        console.print(f"graded in place: {escape(entry)} is {escape(where)}")
    if result.problem:
        console.print(f"[red]problem:[/] {escape(result.problem)}")
    for c in result.checks:
        _details(console, c)


def _details(console: Console, c: CheckResult) -> None:
    if c.message.startswith("not run:"):
        return
    if c.status == "skipped":
        if c.message:  # a skip always says why
            console.print(f"\n{ICONS['skipped']} [bold]{escape(c.id)}[/] ({escape(c.kind)}): {escape(c.message)}",
                          soft_wrap=True)
        return
    if c.status == "passed" and not (c.kind == "question" and c.explanation):
        return
    head = ICONS.get(c.status, escape(c.status))
    console.print(f"\n{head} [bold]{escape(c.id)}[/] ({escape(c.kind)}) — {escape(c.title)}")
    if c.message:
        for line in c.message.splitlines():
            console.print(f"    {escape(line)}")
    for line in figure_lines(c.figures):
        console.print(f"    {escape(line)}")
    if c.answer:  # a wrong answer, where the answer policy shows it (submit-build: the instructor's own key)
        console.print(f"    [dim]answer:[/] {escape(c.answer)}")
    if c.explanation:
        console.print(f"    [dim]why:[/] {escape(c.explanation.strip())}")
    if c.reproduce and c.kind != "question":
        console.print(f"    [dim]reproduce:[/] [cyan]{escape(c.reproduce)}[/]", soft_wrap=True)


def is_deferred(check: CheckResult) -> bool:
    """Skipped here because only official grading can grade it: a reference-only check, a recorded answer."""
    from validator.reference_side import DEFERRED

    return check.status == "skipped" and (check.message.startswith(DEFERRED) or check.message.startswith("recorded"))


def breakdown(report: Report) -> dict[str, float]:
    """Where the points of a report went: earned, deferred to official grading, unanswered, lost."""
    out = {"earned": report.score, "deferred": 0.0, "unanswered": 0.0, "lost": 0.0, "max": report.max_score}
    for ch in report.challenges:
        for c in ch.checks:
            missing = c.max_score - c.score
            if missing <= 0:
                continue
            if is_deferred(c):
                out["deferred"] += missing
            elif c.kind == "question" and c.message.startswith("not answered"):
                out["unanswered"] += missing
            else:
                out["lost"] += missing
    return out


def check_counts(challenge: ChallengeResult) -> str:
    """How a challenge's checks ended, in words: "28 passed, 5 unanswered". An unanswered question
    and a check deferred to official grading are named so, never counted as failed."""
    counts: dict[str, int] = {}
    for c in challenge.checks:
        if is_deferred(c):
            word = "deferred"
        elif c.kind == "question" and c.message.startswith("not answered"):
            word = "unanswered"
        else:
            word = c.status
        counts[word] = counts.get(word, 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


BREAKDOWN_LABELS = (("earned", "earned"), ("deferred", "deferred to official grading"),
                    ("unanswered", "unanswered"), ("lost", "lost"))


def verdict(report: Report, parts: dict[str, float] | None = None) -> tuple[str, str]:
    """The headline's verdict as (tone, words): tone ``good``, ``partial`` (only unanswered) or ``short``."""
    parts = parts or breakdown(report)
    if report.ok:
        return "good", "all checks passed"
    if not parts["lost"] and not parts["unanswered"]:
        return "good", "everything gradable here passed"
    if not parts["lost"]:
        return "partial", "every graded check passed; some questions are unanswered"
    return "short", "some checks fell short"


def render_summary(console: Console, report: Report) -> None:
    report = safe_report(report)
    console.print()
    for ch in report.challenges:
        console.print(f"  {escape(ch.id):32} {_points(ch.score, ch.max_score):>10}   {escape(check_counts(ch))}")
    parts = breakdown(report)
    tone, words = verdict(report, parts)
    colour = {"good": "green", "partial": "yellow", "short": "red"}[tone]
    split = [f"{parts[k]:g} {label}" for k, label in BREAKDOWN_LABELS[1:] if parts[k] > 0]
    console.print(f"[bold]total {_points(report.score, report.max_score)}[/] · [{colour}]{words}[/] · "
                  + (f"{' · '.join(split)} · " if split else "") + f"{report.duration_s:.1f} s")
    for note in report.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def render_report(console: Console, report: Report, *, header: dict, problem: str | None = None,
                  status: str = "") -> None:
    """The whole report again (``submit-build --watch`` redraws it after each regrade): the header, every
    challenge, the summary, then what stops a regrade (a file that does not parse) and the watch's status."""
    render_header(console, **header)
    for result in report.challenges:
        render_challenge(console, result)
    render_summary(console, report)
    render_watch_footer(console, problem=problem, status=status)


def render_watch_footer(console: Console, *, problem: str | None = None, status: str = "") -> None:
    if problem:
        console.print(f"\n[red]not regraded:[/] {escape(problem)}", soft_wrap=True)
        console.print("[yellow]the results above are from the last version that could be graded; fix it and save[/]")
    if status:
        console.print(f"[dim]{escape(status)}[/]", soft_wrap=True)


def redraw(console: Console, draw) -> None:
    """Draw into a buffer, then clear the screen and write it at once: the report is replaced, not
    scrolled past, and never seen half drawn."""
    with console.capture() as captured:
        draw(console)
    console.clear()
    console.file.write(captured.get())
    console.file.flush()
