"""How many checks one bug costs: grade every broken mutant once and print the spread.

    python benchmarks/mutant_spread.py [--seed 0] [--challenge ID ...] [--json out.json]

For each file under tests/implementations/*/broken/ it lists the code checks
lost (failed, error, or skipped), then the median and mean over the library.
"One bug, one check" means most rows name one check, and none names a check
outside the file's MAY_FAIL.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers import LOST, code_checks, grade_file, may_fail, variants  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--challenge", action="append", dest="challenges")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args(argv)
    rows = {}
    for challenge, path in variants("broken"):
        if args.challenges and challenge not in args.challenges:
            continue
        (result,) = grade_file(path, challenge, seeds=[args.seed])
        lost = sorted(c.id for c in code_checks(result) if c.status in LOST)
        outside = sorted(set(lost) - set(may_fail(path) or lost))
        rows[f"{challenge}/{path.stem}"] = lost
        print(f"{len(lost):3d}  {challenge}/{path.stem}: {', '.join(lost) or '-'}"
              + (f"   OUTSIDE MAY_FAIL: {', '.join(outside)}" if outside else ""), flush=True)
    counts = [len(v) for v in rows.values()]
    if counts:
        print(f"{len(counts)} mutants; checks lost per mutant: median {statistics.median(counts):g}, "
              f"mean {statistics.mean(counts):.2f}; exactly one: {sum(c == 1 for c in counts)}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
