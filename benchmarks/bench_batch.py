"""Throughput of `validator grade` on a generated batch: correct, broken and hostile submissions.

Run: python benchmarks/bench_batch.py [--count 100] [--workers 2] [--timeout 30] [--mix bench|class] [--keep DIR] [--no-pin]

Every submission answers the whole catalogue. Correct ones are the reference
itself; broken ones are the reference with one challenge's entry replaced by a
mutant from tests/implementations/*/broken/; hostile ones are the reference
with a red-team attack from tests/redteam/ appended (hangs, bombs, crashes,
forgeries). The mix is fixed by a seed, so runs compare. ``--mix class`` grades a generated
class instead (:func:`generate_class`: independent correct solutions, every library bug of a few
challenges, renamed copies), as the course-view test does. Prints submissions per minute, where
the time went (the canary, the class outputs: dashboard, similarity, audit), the machine's load
average before and after (the machine may be shared: compare ratios within one run, not
absolute times across runs), the CPU time spent per submission (graders and workers together: the
figure load does not change), and the wall time per submission as a ratio to one correct
submission graded alone (one worker) in the same run. Targets on a 2-core machine: 100
submissions in under 5 minutes; 1,000 in under 10 (``--count 1000``; run it once, it is long).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine_speed() -> float:
    """Seconds the slowest of one process a core takes for ``sum(range(10**8))``, all at once: the machine's pure-Python
    speed as a batch sees it (a shared machine's cores can be slower together than one alone)."""
    probe = "import time; t = time.perf_counter(); sum(range(10**8)); print(time.perf_counter() - t)"
    procs = [subprocess.Popen([sys.executable, "-c", probe], stdout=subprocess.PIPE, text=True)
             for _ in range(os.cpu_count() or 1)]
    return max(float(p.communicate()[0]) for p in procs)


def generate(folder: Path, count: int, *, seed: int = 0, broken_share: float = 0.3,
             hostile_share: float = 0.1) -> dict[str, str]:
    """Write ``count`` submission folders under ``folder``; return name -> kind."""
    rng = random.Random(seed)
    reference = (ROOT / "reference" / "layers.py").read_text()
    mutants = sorted((ROOT / "tests" / "implementations").glob("*/broken/*.py"))
    attacks = sorted(p for p in (ROOT / "tests" / "redteam").glob("*/layers.py") if "control" not in p.parent.name)
    kinds = {}
    n_hostile = round(count * hostile_share)
    n_broken = round(count * broken_share)
    plan = ["hostile"] * n_hostile + ["broken"] * n_broken + ["correct"] * (count - n_hostile - n_broken)
    rng.shuffle(plan)
    for i, kind in enumerate(plan):
        name = f"student{i:04d}"
        sub = folder / name
        sub.mkdir(parents=True)
        body = reference
        if kind == "broken":
            mutant = rng.choice(mutants)
            body += f"\n\n# --- mutant {mutant.parent.parent.name}/{mutant.name}\n" + mutant.read_text()
        elif kind == "hostile":
            attack = attacks[i % len(attacks)]
            body += f"\n\n# --- attack {attack.parent.name}\n" + attack.read_text()
            if (attack.parent / "answers.yaml").exists():
                (sub / "answers.yaml").write_text((attack.parent / "answers.yaml").read_text())
        (sub / "layers.py").write_text(body)
        kinds[name] = kind
    return kinds


# -- a generated class: independent correct solutions, each known bug, copied-and-renamed pairs ----------
def _levels(reference: str, catalogue_entries: dict[str, list[str]]) -> list[str]:
    """Challenges ordered so that those built on others come first: appended later, a challenge's own
    correct variant replaces any copy of its classes that an earlier (bigger) variant carried."""
    from validator.batch.signatures import reach

    size = {cid: len(reach(reference, entries)) for cid, entries in catalogue_entries.items()}
    return sorted(catalogue_entries, key=lambda cid: (-size[cid], cid))


def compose(parts: list[str]) -> str:
    """One layers.py from several self-contained files: later definitions replace earlier ones; a
    ``from __future__`` import moves to the top, where Python requires it."""
    future = any("from __future__ import annotations" in p for p in parts)
    body = "\n\n".join(p.replace("from __future__ import annotations", "") for p in parts)
    return ("from __future__ import annotations\n\n" if future else "") + body


def renamed_copy(source: str, rng: random.Random) -> str:
    """What a copier hands in: every local variable renamed, the file re-laid out by ``ast.unparse``
    (no comments, other quotes, other line breaks), a comment and blank lines of their own."""
    import ast

    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        declared = {n for node in ast.walk(fn) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names}
        local = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        mapping = {name: f"{name[:1]}_{rng.randrange(10**6):06d}" for name in sorted(local - params - declared)}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name) and node.id in mapping:
                node.id = mapping[node.id]
    lines = ast.unparse(tree).splitlines()
    out = ["# my solution, written from scratch", ""]
    for line in lines:
        out.append(line)
        if line.startswith(("def ", "class ")) and rng.random() < 0.5:
            out.append("")
    return "\n".join(out) + "\n"


def generate_class(folder: Path, count: int, *, challenges: list[str], seed: int = 0, copies: int = 10,
                   max_per_bug: int = 3) -> dict[str, dict]:
    """``count`` submission folders under ``folder``: every broken file of the mutant library for
    ``challenges`` seeded 1..``max_per_bug`` times, ``copies`` renamed copies of other submissions, and
    independent correct solutions for the rest. Each submission is the whole catalogue, composed from
    the library's correct variants (chosen at random per challenge), with one bug appended to the broken
    ones. Returns name -> {"kind": correct|broken|copy, "bug": "challenge/file" or None, "copy_of": name}."""
    from validator.spec import load_catalogue

    rng = random.Random(seed)
    library = ROOT / "tests" / "implementations"
    reference = (ROOT / "reference" / "layers.py").read_text()
    catalogue = load_catalogue(ROOT / "challenges")
    order = _levels(reference, {cid: list(ch.entries) for cid, ch in catalogue.items()})
    correct = {cid: sorted((library / cid / "correct").glob("*.py")) for cid in order}
    bugs = [p for cid in challenges for p in sorted((library / cid / "broken").glob("*.py"))]
    plan: list[tuple[str, Path | None]] = []
    for bug in bugs:
        plan += [("broken", bug)] * rng.randint(1, max_per_bug)
    if len(plan) + copies > count:
        raise ValueError(f"{count} submissions cannot hold {len(plan)} seeded bugs and {copies} copies")
    plan += [("correct", None)] * (count - copies - len(plan))
    rng.shuffle(plan)
    names = [f"s{i:04d}" for i in range(count)]
    rng.shuffle(names)
    kinds: dict[str, dict] = {}
    texts: dict[str, str] = {}
    for name, (kind, bug) in zip(names, plan):
        parts = [rng.choice(correct[cid]).read_text() for cid in order if correct[cid]]
        if bug is not None:
            parts.append(bug.read_text())
        texts[name] = compose(parts)
        kinds[name] = {"kind": kind, "bug": f"{bug.parent.parent.name}/{bug.stem}" if bug else None, "copy_of": None}
    originals = rng.sample(sorted(texts), copies)
    for name, original in zip(names[len(plan):], originals):
        texts[name] = renamed_copy(texts[original], rng)
        kinds[name] = {**kinds[original], "kind": "copy", "copy_of": original}
    for name, text in texts.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "layers.py").write_text(text)
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=30.0, help="per-submission limit (default 30 s)")
    parser.add_argument("--profile", default="batch")
    parser.add_argument("--challenge", action="append", dest="challenges", help="default: the whole catalogue")
    parser.add_argument("--keep", metavar="DIR", help="generate and grade under DIR, and keep it")
    parser.add_argument("--mix", choices=["bench", "class"], default="bench",
                        help="bench: reference-based correct/broken/hostile; class: a generated class (see above)")
    parser.add_argument("--no-pin", action="store_true",
                        help="let the scheduler place the slots (VALIDATOR_PIN_SLOTS=0), for comparison with pinning")
    args = parser.parse_args()
    env = dict(os.environ, **({"VALIDATOR_PIN_SLOTS": "0"} if args.no_pin else {}))

    load_before = os.getloadavg()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-batch-"))
    subs, out = base / "submissions", base / "out"
    if args.mix == "class":
        kinds = {name: k["kind"] for name, k in generate_class(
            subs, args.count, challenges=args.challenges or ["rms_norm", "softmax", "rope"],
            copies=max(1, args.count // 20)).items()}
    else:
        kinds = generate(subs, args.count)
    cmd = [sys.executable, "-m", "validator", "grade", str(subs), "--out", str(out), "--workers",
           str(args.workers), "--timeout", str(args.timeout), "--profile", args.profile]
    for c in args.challenges or []:
        cmd += ["--challenge", c]
    # Baseline, same run and machine: one correct submission graded alone, one worker, same
    # settings; the batch's wall time per submission is reported as a ratio to it.
    import shutil

    first_correct = next(name for name, kind in kinds.items() if kind == "correct")
    shutil.copytree(subs / first_correct, base / "single" / first_correct)
    single = cmd[:4] + [str(base / "single"), "--out", str(base / "single-out"), "--workers", "1"] + cmd[9:]
    started = time.perf_counter()
    subprocess.run(single, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    baseline = time.perf_counter() - started
    import resource

    def children_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    speed_before = machine_speed()
    cpu_before = children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    elapsed = time.perf_counter() - started
    cpu = children_cpu() - cpu_before  # the grader, its slots and every worker they waited for
    speed_after = machine_speed()
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        sys.exit(f"validator grade exited {proc.returncode}")
    per_kind: dict[str, list[float]] = {}
    scores: dict[str, list[float]] = {}
    for name, kind in kinds.items():
        report = json.loads((out / f"{name}.json").read_text())
        per_kind.setdefault(kind, []).append(report["duration_s"])
        scores.setdefault(kind, []).append(report["score"] / max(report["max_score"], 1e-9))
    n_challenges = len(json.loads((out / f"{next(iter(kinds))}.json").read_text())["challenges"])
    print(f"{args.count} submissions x {n_challenges} challenges, {args.workers} workers, "
          f"profile {args.profile}, timeout {args.timeout:g} s")
    print(f"wall time {elapsed:7.1f} s  ->  {args.count / elapsed * 60:6.1f} submissions/minute "
          f"(target: 100 in 300 s = 20/min)")
    print(f"baseline: one correct submission graded alone {baseline:6.1f} s; batch wall time per submission "
          f"{elapsed / args.count:5.2f} s ({elapsed / args.count / baseline:4.2f}x the baseline)")
    import re

    for label, pattern in (("canary", r"self-test: .*\(([\d.]+) s\)"), ("class outputs", r"dashboard: .*; ([\d.]+) s\)")):
        found = re.search(pattern, proc.stderr)
        if found:
            print(f"  {label}: {float(found.group(1)):.1f} s")
    print(f"CPU time: {cpu:.1f} s in all, {cpu / args.count:.2f} s per submission (graders and workers; what load "
          f"does not change: {os.cpu_count()} cores give {os.cpu_count() * 600 / 1000:.1f} s each to 1000 in 600 s)")
    print(f"projected: 1000 submissions at this rate in {elapsed / args.count * 1000:.0f} s (target 600 s); "
          f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"machine: sum(range(10**8)) took {speed_before:.2f} s before and {speed_after:.2f} s after, on every core "
          "at once (the slowest core; figures compare across runs only as far as these do)")
    for kind, times in sorted(per_kind.items()):
        print(f"  {kind:8s} {len(times):4d}  mean {sum(times) / len(times):5.1f} s  max {max(times):5.1f} s  "
              f"mean score {100 * sum(scores[kind]) / len(scores[kind]):5.1f}%")
    if not args.keep:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
