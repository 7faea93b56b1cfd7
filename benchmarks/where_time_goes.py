"""Where one submission's grading time goes, in a warm batch slot: the profile behind docs/batch.md's Scale table.

Run: python benchmarks/where_time_goes.py [--repeat 3] [--challenges ID ...] [--submission DIR | --class N]
[--no-isolate] [--floor]

Grades the submission (by default the reference, copied in as a student's layers.py) once to warm a slot as
`validator grade` runs one (the case replays, the reference's remembered results, the drawn test tensors),
then ``--repeat`` more times, and prints per graded submission: wall time, the grader's CPU, the worker's
CPU (user and system, read from /proc before it ends; "n/a" where /proc does not show it), the student
calls and how many were traced (under the op recorder and torch's profiler); then, by kind of check
(its test), how many ran, their wall time and share, the grader's CPU in them and their calls of the
student's code. A slot rehearses a challenge's calls (validator.rehearsal): a batch of calls sent ahead is
counted, with the worker's time for it, in the check whose call sent it; ``VALIDATOR_NO_REHEARSAL=1``
sends every call on its own. Figures are means over the repeats. The machine's load changes the wall times, much less
the CPU seconds: compare those across runs.

``--class N`` grades N different submissions of a generated class instead (benchmarks/bench_batch.py's
``--mix class``: correct solutions composed from the library's variants, seeded bugs, renamed copies),
after one warm-up: what a class costs, where the same submission graded again finds every per-file result
(its source scans, its replays) already known.

``--floor`` also runs the last submission's calls in this process (:func:`floor`): the layers' and the
runner's own cost, against which the rest is the grading around them; and that cost per test, each call
counted under the check that asks for it (the submission graded once more for that, without rehearsals).
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _worker_cpu(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds of a live process, from /proc, or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[11]) / tick, int(fields[12]) / tick
    except (OSError, ValueError, IndexError):
        return None


def measure(submission: Path | list[Path], *, repeat: int, challenges: list[str] | None, isolate: bool,
            attribute: bool = False) -> dict:
    """Grade ``submission`` 1 + ``repeat`` times in one slot (or each of a list of submissions once, the first
    as the warm-up); return the means of the measured ones. ``attribute``: then grade the last submission once
    more, unmeasured and unrehearsed, so that each call is sent by the check that asks for it; its calls, each
    with that check's test, are ``m["asked"]`` (what :func:`floor` times per test)."""
    submissions = submission if isinstance(submission, list) else [submission] * (1 + repeat)
    repeat = len(submissions) - 1
    from validator import grading, paths, sandbox
    from validator.batch.grade import slot_config
    from validator.batch.slot import Slot, settle_heap
    from validator.reference_side import OFFICIAL_SEED
    from validator.spec import load_catalogue
    from validator.worker import client

    catalogue = load_catalogue(paths.challenges_dir())
    chosen = challenges or list(catalogue)
    slot = Slot(slot_config(challenges=chosen, seed=OFFICIAL_SEED, profile="batch",
                            limits=sandbox.Limits(wall_s=600), isolate=isolate))
    state = {"check": None, "worker": [], "asked": None}
    by_test: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0, 0, 0])  # n, wall, grader cpu, calls, traced, requests

    # every request reaches the worker through Worker._roundtrip (a rehearsal's batches too: validator.rehearsal)
    original_request, original_close, original_run_check = client.Worker._roundtrip, client.Worker.close, grading.run_check

    def request(self, message, *args, **kwargs):
        calls = message.get("calls") or ([message["call"]] if message.get("call") else [])
        if state["asked"] is not None:  # the attribution pass: not measured
            state["asked"].extend((state["check"] or "(outside checks)", call) for call in calls)
            return original_request(self, message, *args, **kwargs)
        row = by_test[state["check"] or "(outside checks)"]
        row[3] += len(calls)
        row[4] += sum(1 for c in calls if c.get("trace_ops") or c.get("track_memory"))
        row[5] += 1
        return original_request(self, message, *args, **kwargs)

    def close(self):
        proc = getattr(self, "proc", None)
        if proc is not None:
            state["worker"].append(_worker_cpu(proc.pid))
        return original_close(self)

    def run_check(ctx, check, arg):
        state["check"] = check.test
        wall, cpu = time.perf_counter(), time.process_time()
        try:
            return original_run_check(ctx, check, arg)
        finally:
            if state["asked"] is None:  # not the attribution pass
                row = by_test[check.test]
                row[0] += 1
                row[1] += time.perf_counter() - wall
                row[2] += time.process_time() - cpu
            state["check"] = None

    client.Worker._roundtrip, client.Worker.close, grading.run_check = request, close, run_check
    totals = {"wall": 0.0, "grader": 0.0, "worker_user": 0.0, "worker_sys": 0.0, "worker_seen": True, "score": None}
    try:
        for n in range(1 + repeat):
            if n == 1:  # the first grading warmed the slot: measure from here
                by_test.clear()
            state["worker"] = []
            wall, cpu = time.perf_counter(), time.process_time()
            report = slot.grade(f"run{n}", str(submissions[n]))
            settle_heap()  # as a slot does after each submission (this script is short-lived too)
            if n == 0:
                continue
            totals["wall"] += time.perf_counter() - wall
            totals["grader"] += time.process_time() - cpu
            totals["score"] = (report["score"], report["max_score"])
            for seen in state["worker"]:
                if seen is None:
                    totals["worker_seen"] = False
                else:
                    totals["worker_user"] += seen[0]
                    totals["worker_sys"] += seen[1]
        if attribute:  # a rehearsal sends later checks' calls in the batch of an earlier one: not here
            from validator import rehearsal

            state["asked"], enabled = [], rehearsal.ENABLED[0]
            rehearsal.ENABLED[0] = False
            try:
                slot.grade("attribution", str(submissions[-1]))
            finally:
                rehearsal.ENABLED[0] = enabled
    finally:
        client.Worker._roundtrip, client.Worker.close, grading.run_check = original_request, original_close, original_run_check
        slot.close()
    means = {k: (v / repeat if isinstance(v, float) else v) for k, v in totals.items()}
    means["by_test"] = {k: [x / repeat for x in v]
                        for k, v in by_test.items()}
    means["challenges"] = len(chosen)
    means["asked"] = state["asked"]  # with attribute: (test, call), the same submission's calls, each as asked
    return means


def floor(asked: list[tuple[str, dict]], layers: Path) -> tuple[float, dict[str, tuple[int, float]]]:
    """CPU seconds of the calls in ``asked`` ((test, call) pairs) run on ``layers`` as a worker runs them (one
    thread, the CPU generator alone seeded), the second of two passes, in a child forked from this process (which
    keeps its torch settings): what the layers and the runner cost without a grader, a worker process or the
    wire. What a batch spends beyond it is the grading around the calls; a machine whose floor is above the
    target's CPU seconds cannot meet it with these checks, whatever the grader does. Also, per test: how many
    calls, and their CPU seconds (each call timed on its own)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            os.close(read_end)
            quiet = os.open(os.devnull, os.O_WRONLY)  # torch's profiler notices and the layers' warnings
            os.dup2(quiet, 1)
            os.dup2(quiet, 2)
            os.write(write_end, repr(_run_twice(asked, layers)).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not text:
        raise RuntimeError(f"the floor's child process failed (wait status {status})")
    return ast.literal_eval(text)


def _run_twice(asked: list[tuple[str, dict]], layers: Path) -> tuple[float, dict[str, tuple[int, float]]]:
    import runpy

    import torch

    from validator.runner import execute, seed_only_the_cpu, skip_dynamo_disable_shims

    torch.set_num_threads(1)
    seed_only_the_cpu()
    skip_dynamo_disable_shims()
    namespace = runpy.run_path(str(layers), run_name="student_layers")
    for _, call in asked:  # torch's lazily built state, warm as a worker's template has it
        execute(namespace, call)
    by_test: dict[str, tuple[int, float]] = {}
    clock = time.process_time
    start = clock()
    for test, call in asked:
        began = clock()
        execute(namespace, call)
        n, seconds = by_test.get(test, (0, 0.0))
        by_test[test] = (n + 1, seconds + clock() - began)
    return clock() - start, by_test


def render(m: dict) -> str:
    rows = sorted(m["by_test"].items(), key=lambda kv: -kv[1][1])
    checks_wall = sum(v[1] for _, v in rows) or 1e-9
    calls, traced, trips = (sum(v[i] for _, v in rows) for i in (3, 4, 5))
    worker = (f"{m['worker_user'] + m['worker_sys']:.2f} s ({m['worker_user']:.2f} user, {m['worker_sys']:.2f} system)"
              if m["worker_seen"] else "n/a (its /proc entry is not readable here)")
    count = f"{m['challenges']} challenge{'s' if m['challenges'] != 1 else ''}"
    what = (f"{m['distinct']} different submissions of a generated class, {count}, in a warm slot (means):"
            if m.get("distinct") else f"one submission, {count}, score {m['score'][0]:g}/{m['score'][1]:g}, in a "
            "warm slot (means of the repeats):")
    lines = [what,
             f"  wall {m['wall']:.2f} s; grader CPU {m['grader']:.2f} s; worker CPU {worker}",
             f"  {calls:.0f} calls of the student's code, {traced:.0f} of them traced, in {trips:.0f} requests to the worker",
             *([f"  floor: the last submission's {m['floor'][0]} calls run again in one warm process (no grader, worker "
                f"or wire): {m['floor'][1]:.3f} CPU s; graded, a submission cost "
                f"{(m['grader'] + m['worker_user'] + m['worker_sys']) / m['floor'][1]:.1f}x that"] if m.get("floor") else []),
             "", f"{'test':28s} {'checks':>6s} {'wall s':>7s} {'share':>6s} {'grader s':>8s} {'calls':>6s} {'traced':>6s}"]
    for test, (n, wall, cpu, c, t, _) in rows:
        lines.append(f"{test:28s} {n:6.0f} {wall:7.3f} {100 * wall / checks_wall:5.1f}% {cpu:8.3f} {c:6.0f} {t:6.0f}")
    if m.get("floor_by_test"):
        total = m["floor"][1] or 1e-9
        lines += ["", "the floor by test: each call timed on its own, under the check that asks for it "
                      "(calls are what the checks ask for; a rehearsal only sends them sooner)",
                  f"{'test':28s} {'calls':>6s} {'CPU s':>7s} {'share':>6s}"]
        for test, (n, seconds) in sorted(m["floor_by_test"].items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{test:28s} {n:6d} {seconds:7.3f} {100 * seconds / total:5.1f}%")
    return "\n".join(lines)


def _add_floor(m: dict, layers: Path) -> None:
    total, by_test = floor(m["asked"], layers)
    m["floor"], m["floor_by_test"] = (len(m["asked"]), total), by_test


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="measured gradings after the warm-up one")
    parser.add_argument("--challenges", nargs="*", help="only these challenge ids (default: the catalogue)")
    parser.add_argument("--submission", type=Path, help="a submission folder (default: the reference as one)")
    parser.add_argument("--class", dest="distinct", type=int, metavar="N",
                        help="grade N different submissions of a generated class (after one warm-up) instead")
    parser.add_argument("--no-isolate", action="store_true", help="no sandbox (uid, namespaces) for the worker")
    parser.add_argument("--floor", action="store_true",
                        help="also run the last submission's calls in this process (no grader, worker or wire), per test")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.distinct is not None and (args.distinct < 1 or args.submission is not None):
        parser.error("--class takes a count of 1 or more, and no --submission")
    with tempfile.TemporaryDirectory(prefix="where-time-goes-") as scratch:
        submission = args.submission
        if args.distinct:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from bench_batch import generate_class

            folder = Path(scratch) / "class"
            # mostly correct, as a class is (bench_batch's 1,000: 6.5% seeded bugs): one challenge's bugs once each
            bugs = ["rms_norm"] if args.distinct >= 150 else []
            kinds = generate_class(folder, args.distinct + 1, challenges=bugs,
                                   copies=max(1, (args.distinct + 1) // 20), max_per_bug=1)
            chosen = sorted(folder / name for name in kinds)
            m = measure(chosen, repeat=args.distinct, challenges=args.challenges, isolate=not args.no_isolate,
                        attribute=args.floor)
            m["distinct"] = args.distinct
            if args.floor:
                _add_floor(m, chosen[-1] / "layers.py")
            print(render(m))
            return 0
        if submission is None:
            submission = Path(scratch) / "reference-as-student"
            submission.mkdir()
            shutil.copy(ROOT / "reference" / "layers.py", submission / "layers.py")
        m = measure(submission.resolve(), repeat=args.repeat, challenges=args.challenges,
                    isolate=not args.no_isolate, attribute=args.floor)
        if args.floor and (submission / "layers.py").is_file():
            _add_floor(m, submission.resolve() / "layers.py")
    print(render(m))
    return 0


if __name__ == "__main__":
    from validator import lifetime

    lifetime.become_short_lived()  # a process of its own, run as the slot it measures is
    sys.exit(main())
