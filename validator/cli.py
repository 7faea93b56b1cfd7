"""Command line: a thin layer that parses flags and forwards them to keyword-only functions."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence


STAFF_COMMANDS = ("grade", "merge", "regenerate", "release", "strength", "signatures")


def build_parser(*, handout: bool = False) -> argparse.ArgumentParser:
    """The command line; a handout's lists only what a student can run there."""
    parser = argparse.ArgumentParser(prog="validator", description="Grade LLM-layer challenges.")
    sub = parser.add_subparsers(dest="command", required=True)

    sb = sub.add_parser("submit-build", help="grade your student/layers.py and print the report")
    sb.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="grade only this challenge (repeatable); default: all")
    sb.add_argument("--student", metavar="PATH",
                    help="a layers.py file, a directory holding one, or the root of your own package (graded "
                         "through the [tool.validator.map] table of its pyproject.toml, or --map)")
    sb.add_argument("--map", dest="map_path", metavar="PATH",
                    help="a TOML file saying which class or function of your package implements each entry "
                         "(the tables of [tool.validator]); --student is then your package's root")
    sb.add_argument("--answers", metavar="PATH", help="answers YAML (default: answers.yaml beside layers.py)")
    sb.add_argument("--student-id", metavar="ID",
                    help="your student id, as official grading knows you (on Gradescope: your email); saved in "
                         "answers.yaml, it draws your own numbers for the questions asked per student")
    sb.add_argument("--json", dest="json_path", metavar="PATH", help="also write the report as JSON")
    sb.add_argument("--html", dest="html_path", metavar="PATH",
                    help="also write the report as one self-contained HTML page, with the init histograms")
    sb.add_argument("--seed", type=int, help="replay a run: the seed printed in a report")
    sb.add_argument("--check", action="append", dest="checks", metavar="ID",
                    help="run only this check (repeatable), e.g. to reproduce a failure")
    sb.add_argument("--profile", choices=["quick", "default", "ci", "batch"],
                    help="hypothesis effort (default: 'ci' when $CI is set, else 'default')")
    sb.add_argument("--timeout", type=float, metavar="SECONDS",
                    help="cap on each call into your code (default: each check's own, usually 30 s)")
    sb.add_argument("--no-input", dest="interactive", action="store_false", default=None,
                    help="never prompt for missing answers")
    sb.add_argument("--device", metavar="DEVICE",
                    help="run your layers on this torch device, e.g. cuda (the reference and the comparisons "
                         "stay on the CPU; the speed check times the CPU)")
    sb.add_argument("--jobs", type=int, metavar="N",
                    help="grade this many challenges at once, each with its own worker "
                         "(default: one per core, at most 4; results are the same)")
    sb.add_argument("--watch", action="store_true",
                    help="keep running: after each save, regrade the challenges whose code or answers changed and "
                         "redraw the report (Ctrl-C stops)")

    if handout:
        return parser
    rg = sub.add_parser("regenerate", help="instructor: rebuild the stub, answers template, pages and fixtures "
                                           "from the reference and the specs, then self-check")
    rg.add_argument("--check", action="store_true",
                    help="write nothing; fail if anything is stale or the self-check fails (for CI)")
    rg.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="record and self-check only this challenge (repeatable); pages and stub are always whole")
    rg.add_argument("--force", action="store_true", help="re-record the frozen reference results even if fresh")
    rg.add_argument("--no-self-check", dest="self_check", action="store_false",
                    help="skip grading the reference and the stub")
    rg.add_argument("--strength", action="store_true",
                    help="also run `validator strength` (cached) first; the self-check then fails on every surviving "
                         "mutant not marked equivalent")

    rl = sub.add_parser("release", help="instructor: build a student handout or an autograder bundle")
    rl.add_argument("--out", metavar="DIR", help="write the student handout (no reference, no answer key) here")
    rl.add_argument("--autograder", metavar="DIR",
                    help="write the grading bundle (reference, keys, Gradescope and GitHub Actions files) here, "
                         "and DIR.zip beside it: the upload for Gradescope")
    rl.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="the bundle carries and grades only this challenge (repeatable; an assignment's subset); "
                         "default: all")
    rl.add_argument("--force", action="store_true", help="replace DIR (and the bundle's zip) if it exists")
    rl.add_argument("--notebook", action="store_true",
                    help="with --out: also write one student notebook per challenge under DIR/notebooks/, each "
                         "graded from inside Jupyter by its last cell")
    rl.add_argument("--notebook-from", action="append", dest="notebook_from", metavar="NOTEBOOK",
                    help="with --out: also hand out this instructor notebook (repeatable), its solution regions "
                         "(marked as nbgrader marks them) cut")
    rl.add_argument("--allow-degraded", action="store_true",
                    help="let the bundle grade (unofficially, and say so) where it cannot sandbox submissions")
    rl.add_argument("--show-answers", choices=["never", "after_due_date", "always"], default="after_due_date",
                    help="the bundle's answer policy: whether a wrong answer's feedback gives the right answer "
                         "(default: after_due_date, which Gradescope holds back until the due date)")

    st = sub.add_parser("strength", help="instructor: grade one-point and bug-class mutants of the reference; "
                                         "report which bugs each challenge's checks miss")
    st.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="only this challenge (repeatable); default: all")
    st.add_argument("--json", dest="json_path", metavar="PATH", help="also write the report as JSON")
    st.add_argument("--html", dest="html_path", metavar="PATH",
                    help="also write the report as one self-contained HTML page (survivors' diffs included)")
    st.add_argument("--jobs", type=int, metavar="N", help="mutants graded at once (default: CPU count)")
    st.add_argument("--seed", type=int, action="append", dest="seeds", metavar="SEED",
                    help="seed every mutant is graded with (default: `validator grade`'s, a seed handouts record); "
                         "repeatable: once per seed, a sweep that shows a check catching a bug only on lucky draws")
    st.add_argument("--profile", default="batch", help="hypothesis effort (default: batch)")
    st.add_argument("--all-checks", action="store_true",
                    help="grade every check of every mutant (the kill matrix: dead weight, blast radius, and a "
                         "warning for each bug that costs several checks); default: stop each mutant at its first "
                         "catching check")
    st.add_argument("--cache", dest="cache_dir", metavar="DIR",
                    help="where results are cached (default: .validator-cache/strength)")
    st.add_argument("--no-cache", dest="use_cache", action="store_false", help="grade every mutant again")
    st.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                    help="wall time allowed per mutant (default: 300)")
    st.add_argument("--no-isolation", dest="isolate", action="store_false",
                    help="grade the mutants without the sandbox (they are the reference's own code)")
    st.add_argument("--no-bug-classes", dest="bug_classes", action="store_false",
                    help="only the one-point mutants (default: the bug-class ones too: a cache on the first call, an "
                         "input edited in place, a view for a reshape, a reseed, ...)")

    gr = sub.add_parser("grade", help="staff: grade a folder of submissions, each sandboxed, into OUT_DIR")
    gr.add_argument("submissions", metavar="SUBMISSIONS_DIR",
                    help="one folder per submission, each with a layers.py (and optionally answers.yaml), "
                         "a package, or notebooks")
    gr.add_argument("--out", required=True, metavar="OUT_DIR", help="where reports and grades.csv go")
    gr.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="grade only this challenge (repeatable); default: all")
    gr.add_argument("--workers", type=int, metavar="N", help="submissions graded at once (default: CPU count)")
    gr.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                    help="wall time (and CPU time) allowed per submission (default: 300)")
    gr.add_argument("--memory", type=int, default=2048, metavar="MB",
                    help="memory allowed per submission (default: 2048)")
    gr.add_argument("--shard", metavar="I/N", help="grade only shard I of N (1-based), for a job array")
    gr.add_argument("--seed", type=int, help="fixed seed for every submission (default: one that handouts record, "
                                             "so that the feedback's reproduce lines replay there)")
    gr.add_argument("--profile", default="batch", help="hypothesis effort (default: batch)")
    gr.add_argument("--no-isolation", dest="isolate", action="store_false",
                    help="run student code without the sandbox (trusted code only, e.g. debugging)")
    gr.add_argument("--show-answers", choices=["never", "after_due_date", "always"], default=None,
                    help="whether a wrong answer's feedback gives the right answer and the explanation "
                         "(default: after_due_date: only in results.json tests Gradescope shows after the due "
                         "date, never in the other reports)")
    _class_options(gr)

    mg = sub.add_parser("merge", help="staff: combine the OUT_DIRs of `grade --shard` runs into one gradebook")
    mg.add_argument("shard_dirs", nargs="+", metavar="SHARD_OUT_DIR", help="output folders of the shards")
    mg.add_argument("--out", required=True, metavar="OUT_DIR", help="where the merged outputs go")
    mg.add_argument("--allow-missing", action="store_true",
                    help="write the gradebook even if some shards are missing")
    _class_options(mg, merge=True)

    sg = sub.add_parser("signatures", help="instructor: record which checks each known bug fails (the mutant "
                                           "library, strength's mutants), to name a class's failure patterns")
    sg.add_argument("--out", metavar="PATH", help="where to write them (default: challenges/signatures.json)")
    sg.add_argument("--library", metavar="DIR", help="the mutant library (default: tests/implementations)")
    sg.add_argument("--challenge", action="append", dest="challenges", metavar="ID",
                    help="only this challenge (repeatable); default: all")
    sg.add_argument("--seed", type=int, help="the seed `validator grade` uses (default: its own default, "
                                             "a seed handouts record)")
    sg.add_argument("--profile", default="batch", help="the profile `validator grade` uses (default: batch)")
    sg.add_argument("--workers", type=int, metavar="N", help="files graded at once (default: CPU count)")
    sg.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS", help="per file (default: 120)")
    sg.add_argument("--strength", action="store_true",
                    help="also add the caught mutants of `validator strength --all-checks` found in its cache")
    sg.add_argument("--run-strength", action="store_true",
                    help="run `validator strength --all-checks` first (cached), then add its mutants")
    sg.add_argument("--no-isolation", dest="isolate", action="store_false",
                    help="grade without the sandbox (the files are the course's own)")
    return parser


def _class_options(p: argparse.ArgumentParser, *, merge: bool = False) -> None:
    """The options of the class outputs (dashboard, regrade audit, similarity), shared by grade and merge."""
    shards = " (default: the shards' own)" if merge else ""
    p.add_argument("--compare", metavar="PREVIOUS_OUT",
                   help="list, per student and check, what changed since that earlier run's output, and why" + shards)
    p.add_argument("--no-lowering", action="store_true", default=None if merge else False,
                   help="with --compare: the gradebook keeps each student's higher grade, old or new" + shards)
    p.add_argument("--boilerplate", action="append", metavar="PATH",
                   help="code every submission may share (besides the handout's stub), left out of the "
                        "similarity report (repeatable)" + shards)
    p.add_argument("--public-solutions", metavar="DIR",
                   help="known public solutions (a folder or .py file each) to compare every submission with" + shards)
    p.add_argument("--signatures", metavar="PATH",
                   help="the known bugs' signatures (default: challenges/signatures.json, when present)" + shards)


def run() -> int:
    """The process's entry (the `validator` script, `python -m validator`): :func:`main`, then a fast exit.

    With torch loaded the interpreter spends most of a second at exit collecting a quarter of a
    million objects it is about to free anyway; frozen, they are skipped (atexit handlers, flushes and
    finalizers still run). The heap is frozen once before grading too, when the worker's warm-up has
    imported everything (:mod:`validator.lifetime`). Only here, never in :func:`main`, which
    tests call in their own process.
    """
    import gc

    from validator import lifetime

    lifetime.become_short_lived()
    code = main()
    gc.freeze()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    from validator import paths

    argv = list(sys.argv[1:] if argv is None else argv)
    handout = paths.is_handout()
    if handout and argv and argv[0] in STAFF_COMMANDS:
        print(f"`validator {argv[0]}` is a staff command (for instructors and course staff): this copy is a student handout (it has no reference "
              "implementation), so it cannot grade others, merge, regenerate or release. "
              "Use `validator submit-build` to grade your own layers.", file=sys.stderr)
        return 2
    parser = build_parser(handout=handout)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    kwargs = {k: v for k, v in vars(args).items() if k != "command"}
    if args.command == "submit-build":
        from validator.submit import main as submit_main
        return submit_main(**kwargs)
    if args.command in ("regenerate", "release", "strength"):
        try:
            module = __import__(f"validator.instructor.{args.command}", fromlist=["main"])
        except ModuleNotFoundError:
            print(f"`validator {args.command}` is an instructor command: this copy (a student handout) "
                  "does not include the instructor tools", file=sys.stderr)
            return 2
        return module.main(**kwargs)
    if args.command == "grade":
        from validator.batch.grade import main as grade_main
        return grade_main(**kwargs)
    if args.command == "merge":
        from validator.batch.merge import main as merge_main
        return merge_main(**kwargs)
    if args.command == "signatures":
        from validator.batch.signatures import main as signatures_main
        return signatures_main(**kwargs)
    parser.error(f"unknown command {args.command}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
