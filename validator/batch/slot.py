"""One grading slot: a grader process that grades submissions one at a time for the batch.

Started as ``python -m validator.batch.slot CMD_FD RESULT_FD`` by
:mod:`validator.batch.pool`. It loads the catalogue and the reference once,
starts its own worker :class:`~validator.worker.client.Template`, and then,
for each ``grade`` request, forks a sandboxed worker, grades, and answers with
the report as plain data. Messages on both pipes are JSON only.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from validator.worker.protocol import ChannelClosed, Reader, write_message

MAX_ANSWERS_BYTES = 64 << 10
_SURROGATES = re.compile("[\ud800-\udfff]")


class Slot:
    def __init__(self, config: dict[str, Any]):
        from validator import paths, sandbox
        from validator.spec import load_catalogue
        from validator.worker.client import Template

        from validator.worker.main import skip_absent_device_seeding

        skip_absent_device_seeding()
        self.config = config
        self.catalogue = load_catalogue(config.get("challenges_dir") or paths.challenges_dir())
        self.limits = sandbox.Limits(**config["limits"])
        self.lease = sandbox.UidLease() if config.get("isolate", True) and os.geteuid() == 0 else None
        self.box = sandbox.plan(self.limits, hide=config.get("hide", []), files={},
                                uid=self.lease.uid if self.lease else None, isolate=config.get("isolate", True))
        self.template = Template()
        self.scratch = tempfile.TemporaryDirectory(prefix="validator-slot-")
        self.empty_file = Path(self.scratch.name) / "layers.py"
        self.empty_file.write_text("")

    def grade(self, name: str, folder: str) -> dict[str, Any]:
        from validator.worker.client import TemplateDied

        for attempt in (1, 2):
            try:
                return self._grade(name, Path(folder))
            except TemplateDied:
                self._restart_template()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _restart_template(self) -> None:
        from validator.worker.client import Template

        try:
            self.template.close()
        except Exception:  # noqa: BLE001
            pass
        self.template = Template()

    def _grade(self, name: str, folder: Path) -> dict[str, Any]:
        from validator.api import grade
        from validator.batch.submissions import Submission
        from validator.questions import AnswersError
        from validator.worker.client import SandboxedWorker

        sub = Submission(name, folder)
        notes: list[str] = []
        answers: dict = {}
        if sub.answers.is_file():
            if sub.answers.stat().st_size > MAX_ANSWERS_BYTES:
                notes.append(f"answers.yaml is larger than {MAX_ANSWERS_BYTES >> 10} KiB and was ignored")
            else:
                try:
                    answers = safe_answers(sub.answers, notes)
                except AnswersError as exc:
                    notes.append(f"answers.yaml ignored: {str(exc).replace(str(folder) + os.sep, '')}")
        if sub.layers.is_symlink():
            notes.append("layers.py is a symbolic link, which is not graded: submit the file itself")
        elif not sub.layers.is_file():
            notes.append("the submission has no layers.py")
        layers = sub.layers
        if sub.layers.is_symlink() or not sub.layers.is_file():
            layers = self.empty_file  # never let the grader read what a link points at (the answer key?)
        box = replace(self.box, files=sub.files())
        worker = SandboxedWorker(layers, template=self.template, sandbox=box, budget_s=self.limits.wall_s)
        try:
            report = grade(layers, challenges=self.config.get("challenges"), seed=self.config["seed"],
                           profile=self.config["profile"], answers=answers, worker=worker,
                           catalogue=self.catalogue, reference_dir=self.config.get("reference_dir"),
                           student_arg=None, reference_mode="live")
        finally:
            worker.close()
        report.student = name
        report.notes = notes + list(report.notes)
        return scrub(report.to_dict())

    def close(self) -> None:
        self.template.close()
        self.scratch.cleanup()
        if self.lease:
            self.lease.release()


def safe_answers(path: Path, notes: list[str]) -> dict:
    """Load a student's answers.yaml without aliases (no billion laughs) and with scalar answers only."""
    import yaml

    from validator.questions import AnswersError, load_answers

    try:
        if any(isinstance(e, yaml.AliasEvent) for e in yaml.parse(path.read_text(encoding="utf-8"))):
            raise AnswersError("answers.yaml: YAML aliases (*name) are not allowed")
    except yaml.YAMLError:
        pass  # load_answers reports it with its line
    except UnicodeDecodeError:
        raise AnswersError("answers.yaml is not UTF-8 text") from None
    answers = load_answers(path)
    for challenge, given in answers.items():
        for question, value in list(given.items()):
            if not (value is None or isinstance(value, (str, int, float, bool))):
                notes.append(f"answers.yaml: {challenge}.{question} is not a single value and was ignored")
                given[question] = None
    return answers


def scrub(obj: Any) -> Any:
    """Strings as any reporter can write them: lone surrogates (from student text) become U+FFFD."""
    if isinstance(obj, str):
        return _SURROGATES.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {scrub(k): scrub(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [scrub(v) for v in obj]
    return obj


def main(cmd_fd: int, result_fd: int) -> None:
    reader = Reader(cmd_fd)
    config = reader.read()
    try:
        slot = Slot(config)
    except Exception:  # noqa: BLE001 - tell the pool why this slot cannot work
        write_message(result_fd, {"op": "failed", "error": traceback.format_exc(limit=5)})
        return
    write_message(result_fd, {"op": "ready", "degraded": slot.box.degraded, "uid": slot.box.uid})
    try:
        while True:
            try:
                request = reader.read()
            except ChannelClosed:
                return
            if request.get("op") != "grade":
                return
            started = time.perf_counter()
            reply: dict[str, Any] = {"op": "result", "name": request["name"]}
            try:
                reply["report"] = slot.grade(request["name"], request["folder"])
            except Exception:  # noqa: BLE001 - a grader failure for this submission; the batch goes on
                reply["internal_error"] = traceback.format_exc(limit=8)
            reply["seconds"] = time.perf_counter() - started
            write_message(result_fd, reply)
    finally:
        slot.close()


if __name__ == "__main__":
    sys.stdout = sys.stderr  # nothing of the grader's may land on a descriptor the pool reads
    main(int(sys.argv[1]), int(sys.argv[2]))
