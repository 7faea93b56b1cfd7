"""`validator merge`: combine the output folders of `validator grade --shard I/N` runs.

Each shard leaves ``shards/shard-I-of-N.json`` beside its reports. Merge checks
that the shards agree (same N, seed, profile, challenges), that none is missing
and no submission was graded twice, copies the per-submission files into
``--out`` and rebuilds ``grades.csv`` from the JSON reports.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Sequence, TextIO

from validator.api import UsageError
from validator.batch.reports import report_from_dict
from validator.reporters.csv_report import write_csv

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2
_AGREE = ("shards", "seed", "profile", "challenges")


def merge(*, shard_dirs: Sequence[str | Path], out: str | Path, allow_missing: bool = False,
          stream: TextIO | None = None) -> int:
    stream = stream or sys.stderr
    out = Path(out)
    manifests: dict[int, tuple[Path, dict]] = {}
    for folder in map(Path, shard_dirs):
        found = sorted((folder / "shards").glob("shard-*-of-*.json"))
        if not found:
            raise UsageError(f"{folder} holds no shards/shard-I-of-N.json: is it a `validator grade` output?")
        for path in found:
            data = json.loads(path.read_text(encoding="utf-8"))
            if data["shard"] in manifests and manifests[data["shard"]][0] != folder:
                raise UsageError(f"shard {data['shard']} appears in both {manifests[data['shard']][0]} and {folder}")
            manifests[data["shard"]] = (folder, data)
    first = next(iter(manifests.values()))[1]
    for index, (folder, data) in manifests.items():
        for key in _AGREE:
            if data.get(key) != first.get(key):
                raise UsageError(f"shard {index} in {folder} was graded with {key}={data.get(key)!r}, "
                                 f"others with {first.get(key)!r}: regrade it with the same options")
    missing = sorted(set(range(1, first["shards"] + 1)) - set(manifests))
    if missing and not allow_missing:
        print(f"error: shard(s) {', '.join(map(str, missing))} of {first['shards']} missing; rerun them "
              "(or pass --allow-missing)", file=stream)
        return EXIT_INCOMPLETE
    rows, owner, failures = [], {}, []
    out.mkdir(parents=True, exist_ok=True)
    for index in sorted(manifests):
        folder, data = manifests[index]
        failures += data.get("grader_failures", [])
        for name in data["submissions"]:
            if name in owner:
                raise UsageError(f"submission {name!r} was graded by shards {owner[name]} and {index}")
            owner[name] = index
            report_path = folder / f"{name}.json"
            if not report_path.is_file():
                raise UsageError(f"shard {index} lists {name!r} but {report_path} is missing")
            rows.append((name, report_from_dict(json.loads(report_path.read_text(encoding="utf-8")))))
            if folder.resolve() != out.resolve():
                for rel in (f"{name}.json", f"gradescope/{name}/results.json", f"junit/{name}.xml", f"html/{name}.html"):
                    if (folder / rel).is_file():
                        (out / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(folder / rel, out / rel)
    write_csv(rows, out / "grades.csv", challenges=first["challenges"])
    print(f"merged {len(manifests)} of {first['shards']} shard(s): {len(rows)} submission(s), "
          f"{len(failures)} grader failure(s); gradebook: {out / 'grades.csv'}", file=stream)
    return EXIT_INCOMPLETE if missing else EXIT_OK


def main(*, stream: TextIO | None = None, **kwargs) -> int:
    try:
        return merge(stream=stream, **kwargs)
    except (UsageError, OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_USAGE
