"""Wall time of `validator submit-build` on the reference, next to a bare `import torch`.

Run: python benchmarks/bench_submit.py [--repeat N] [--only NAME ...]
Prints the median of N runs for: python -c "import torch"; submit-build on
token_embedding; on the eight challenges of the embedding module (the catalogue the
4x target was set for); on the whole catalogue (default --jobs, then --jobs 1);
and a `--watch` regrade: the time from saving an edit of the reference's `Embedding`
to the redrawn report of token_embedding, in a watch started on a copy of it; and the whole
catalogue as a student runs it, in a handout (`validator release --out`, the reference copied in as
the student's layers.py, a seed the handout recorded, frozen reference results). Every run uses seed
11 (OFFICIAL_SEED): in a handout, `submit-build` given no seed picks one of the recorded seeds, whose cases
are on disk (challenges/fixtures/<id>.cases); in the repository it picks a random seed, whose cases it
draws (about a fifth slower for the whole catalogue). Each line
gives its ratio to the import, measured in the same run on the same machine, so the ratio
is what to compare across machines; and, where /proc shows it (Linux), the CPU seconds the
run used (every process, workers included) and their ratio to the import's, which a busy
machine disturbs far less than wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from validator.reference_side import OFFICIAL_SEED  # noqa: E402 - after the project is on the path
EMBEDDING_MODULE = ["token_embedding", "token_embedding_xavier", "embedding_functional",
                    "sinusoidal_positional_encoding", "learned_positional_embedding", "transformer_embedding",
                    "tied_lm_head", "embedding_backward"]
LINES = ("one", "module", "catalogue", "serial", "handout", "watch")


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(cmd: list[str], repeat: int, cwd: Path = ROOT) -> tuple[float, float]:
    """Median wall and CPU seconds of ``cmd`` (CPU: the process and every child it waited for)."""
    walls, cpus = [], []
    for _ in range(repeat):
        cpu, started = _children_cpu(), time.perf_counter()
        subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def _process_cpu(pid: int) -> float | None:
    """CPU seconds of a running process and of the children it has reaped (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(v) for v in fields[11:15]) / ticks  # utime, stime, cutime, cstime


def _read_until(proc: subprocess.Popen, done, timeout: float = 600.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"submit-build --watch stopped (status {proc.wait()})")
        if done(line):
            return line
    raise RuntimeError("submit-build --watch did not answer in time")


def watch_regrade(repeat: int, profile: str) -> tuple[float, float | None]:
    """Median seconds (wall, CPU) from a save to the redrawn report of one challenge in `submit-build --watch`.

    The watch grades token_embedding on a copy of the reference; each save adds a comment line inside
    ``Embedding.forward``, code only that challenge's entry runs, so each save regrades it alone. The clock
    stops when the watch prints the regrade's status line, after the report (stdout is a pipe: plain output).
    """
    original = (ROOT / "reference" / "layers.py").read_text(encoding="utf-8")
    start = original.index("class Embedding(")
    anchor = original.index("\n", original.index("def forward", start)) + 1
    walls, cpus = [], []
    with tempfile.TemporaryDirectory(prefix="bench-watch-") as tmp:
        layers = Path(tmp) / "layers.py"
        layers.write_text(original, encoding="utf-8")
        proc = subprocess.Popen([sys.executable, "-m", "validator", "submit-build", "--watch", "--student", tmp,
                                 "--no-input", "--seed", str(OFFICIAL_SEED), "--profile", profile, "--challenge",
                                 "token_embedding"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        try:
            _read_until(proc, lambda line: line.startswith("[watch] watching"))
            time.sleep(0.5)
            for i in range(repeat + 1):  # the first regrade also warms the files' caches: not counted
                edited = original[:anchor] + f"        # save {i}\n" + original[anchor:]
                cpu = _process_cpu(proc.pid)
                started = time.perf_counter()
                layers.write_text(edited, encoding="utf-8")
                line = _read_until(proc, lambda line: line.startswith("[watch]") and " saved" in line)
                wall = time.perf_counter() - started
                after = _process_cpu(proc.pid)
                if "regraded token_embedding" not in line:
                    raise RuntimeError(f"the save did not regrade token_embedding alone: {line.strip()}")
                if i:
                    walls.append(wall)
                    if cpu is not None and after is not None:
                        cpus.append(after - cpu)
                time.sleep(0.3)
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    return statistics.median(walls), (statistics.median(cpus) if cpus else None)


def handout_catalogue(repeat: int, profile: str) -> tuple[float, float]:
    """Median seconds (wall, CPU) of the whole catalogue graded in a fresh handout, as a student runs it."""
    with tempfile.TemporaryDirectory(prefix="bench-handout-") as tmp:
        out = Path(tmp) / "handout"
        subprocess.run([sys.executable, "-m", "validator", "release", "--out", str(out)], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL)
        (out / "student" / "layers.py").write_text((ROOT / "reference" / "layers.py").read_text(encoding="utf-8"),
                                                   encoding="utf-8")
        return timed([sys.executable, "-m", "validator", "submit-build", "--no-input", "--seed", str(OFFICIAL_SEED),
                      "--profile", profile], repeat, cwd=out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="default")
    parser.add_argument("--only", nargs="+", choices=LINES, help="measure only these lines (and the import)")
    args = parser.parse_args()
    wanted = set(args.only or LINES)
    base = [sys.executable, "-m", "validator", "submit-build", "--student", "reference", "--no-input",
            "--seed", str(OFFICIAL_SEED), "--profile", args.profile]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    t_import, c_import = timed([sys.executable, "-c", "import torch"], args.repeat)

    def show(label: str, wall: float, cpu: float | None, note: str = "") -> None:
        cpu_part = f"; CPU {cpu:5.2f} s, {cpu / c_import:4.2f}x" if cpu is not None else ""
        print(f"{label:38} {wall:7.2f} s  ({wall / t_import:5.2f}x import torch{cpu_part}){note}", flush=True)

    print(f"{'import torch':38} {t_import:7.2f} s  (CPU {c_import:5.2f} s; load average {load:.1f} "
          f"on {os.cpu_count()} cores)", flush=True)
    if "one" in wanted:
        t_one, c_one = timed(base + ["--challenge", "token_embedding"], args.repeat)
        show("submit-build token_embedding", t_one, c_one)
    if "module" in wanted:
        show(f"submit-build embedding module ({len(EMBEDDING_MODULE)})",
             *timed(base + [arg for c in EMBEDDING_MODULE for arg in ("--challenge", c)], args.repeat),
             "; default --jobs")
    if "catalogue" in wanted:
        show("submit-build whole catalogue", *timed(base, args.repeat), f"; default --jobs on {os.cpu_count()} cores")
    if "serial" in wanted:
        show("  the same with --jobs 1", *timed(base + ["--jobs", "1"], args.repeat))
    if "handout" in wanted:
        show("handout: whole catalogue", *handout_catalogue(args.repeat, args.profile),
             "; a recorded seed, frozen reference")
    if "watch" in wanted:
        show("--watch: save to report, token_embedding", *watch_regrade(args.repeat, args.profile))


if __name__ == "__main__":
    main()
