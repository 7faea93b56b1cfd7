"""Wall time of `validator submit-build` on the reference, next to a bare `import torch`.

Run: python benchmarks/bench_submit.py [--repeat N]
Prints the median of N runs for: python -c "import torch"; submit-build on
token_embedding; on the eight challenges of the embedding module (the catalogue the
4x target was set for); on the whole catalogue (default --jobs, then --jobs 1);
and their ratios to the import. Both are measured in the same run, on the same machine, so the ratio
is what to compare across machines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EMBEDDING_MODULE = ["token_embedding", "token_embedding_xavier", "embedding_functional",
                    "sinusoidal_positional_encoding", "learned_positional_embedding", "transformer_embedding",
                    "tied_lm_head", "embedding_backward"]


def timed(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", default="default")
    args = parser.parse_args()
    base = [sys.executable, "-m", "validator", "submit-build", "--student", "reference", "--no-input",
            "--seed", "0", "--profile", args.profile]
    t_import = timed([sys.executable, "-c", "import torch"], args.repeat)
    t_one = timed(base + ["--challenge", "token_embedding"], args.repeat)
    t_module = timed(base + [arg for c in EMBEDDING_MODULE for arg in ("--challenge", c)], args.repeat)
    t_all = timed(base, args.repeat)
    t_serial = timed(base + ["--jobs", "1"], args.repeat)
    print(f"import torch                         {t_import:7.2f} s")
    print(f"submit-build token_embedding         {t_one:7.2f} s  ({t_one / t_import:5.1f}x import torch)")
    print(f"submit-build embedding module ({len(EMBEDDING_MODULE)})   {t_module:7.2f} s  "
          f"({t_module / t_import:5.1f}x import torch; default --jobs)")
    print(f"submit-build whole catalogue         {t_all:7.2f} s  ({t_all / t_import:5.1f}x import torch, "
          f"{t_all / t_one:4.1f}x one challenge; default --jobs on {os.cpu_count()} cores)")
    print(f"  the same with --jobs 1             {t_serial:7.2f} s  ({t_serial / t_import:5.1f}x import torch)")


if __name__ == "__main__":
    main()
