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

from validator import paths
from validator.api import UsageError
from validator.batch.compare import combine, load_run
from validator.batch.grade import class_outputs
from validator.batch.reports import report_from_dict
from validator.batch.similarity import Doc
from validator.reporters import write_atomic
from validator.spec import load_catalogue

EXIT_OK, EXIT_INCOMPLETE, EXIT_USAGE = 0, 1, 2
_AGREE = ("shards", "seed", "profile", "challenges")


def merge(*, shard_dirs: Sequence[str | Path], out: str | Path, allow_missing: bool = False,
          stream: TextIO | None = None, compare: str | Path | None = None, no_lowering: bool | None = None,
          boilerplate: Sequence[str | Path] | None = None, public_solutions: str | Path | None = None,
          signatures: str | Path | None = None) -> int:
    """Merge the shards into ``out``; then the class outputs over everyone (the dashboard, and the regrade's
    audit): the options are the shards' own (recorded in their manifests) unless given here."""
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
    differ = sorted(i for i, (_, data) in manifests.items() if data.get("fingerprints") != first.get("fingerprints"))
    if differ:
        print(f"warning: shard(s) {', '.join(map(str, differ))} were graded with another spec, reference or grader "
              "than the first (their manifests' fingerprints differ): regrade them for one consistent gradebook",
              file=stream)
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
                for rel in (f"{name}.json", f"gradescope/{name}/results.json", f"junit/{name}.xml", f"html/{name}.html",
                            f"similarity/{name}.json"):
                    if (folder / rel).is_file():
                        (out / rel).parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(folder / rel, out / rel)
    run = combine([data for _, (_, data) in sorted(manifests.items())])
    run["shards"] = first["shards"]
    options = dict(first.get("class_options") or {})
    given = {"compare": str(Path(compare).resolve()) if compare else None, "no_lowering": no_lowering,
             "boilerplate": [str(Path(b).resolve()) for b in boilerplate] if boilerplate else None,
             "public_solutions": str(Path(public_solutions).resolve()) if public_solutions else None,
             "signatures": str(Path(signatures).resolve()) if signatures else None}
    options.update({k: v for k, v in given.items() if v is not None})
    options.setdefault("boilerplate", [])
    run["class_options"] = options
    if options.get("no_lowering") and not options.get("compare"):
        raise UsageError("--no-lowering needs --compare PREVIOUS_OUT: the grades it must not lower")
    previous_run = load_run(options["compare"]) if options.get("compare") else None
    docs = {}
    for name, _ in rows:
        try:
            docs[name] = Doc.from_dict(json.loads((out / "similarity" / f"{name}.json").read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError):
            continue  # graded by an older grader: compared without it
    catalogue = load_catalogue(paths.challenges_dir())
    challenges = [catalogue[c] if c in catalogue else _Unknown(c) for c in first["challenges"]]
    write_atomic(out / "run.json", json.dumps(run, indent=1) + "\n")
    class_outputs(out, rows, run=run, challenges=challenges, docs=docs, csv_name="grades.csv", label="",
                  whole=not missing, previous_run=previous_run, stream=stream)
    print(f"merged {len(manifests)} of {first['shards']} shard(s): {len(rows)} submission(s), "
          f"{len(failures)} grader failure(s); gradebook: {out / 'grades.csv'}", file=stream)
    return EXIT_INCOMPLETE if missing else EXIT_OK


class _Unknown:
    """A challenge a shard graded that the catalogue no longer has: its id is all the class outputs need."""

    def __init__(self, cid: str):
        self.id, self.entries = cid, []


def main(*, stream: TextIO | None = None, **kwargs) -> int:
    from validator.spec import SpecError

    try:
        return merge(stream=stream, **kwargs)
    except (UsageError, SpecError, OSError, ValueError, KeyError) as exc:
        print(f"error: {exc}", file=stream or sys.stderr)
        return EXIT_USAGE
