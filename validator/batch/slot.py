"""One grading slot: a grader process that grades submissions one at a time for the batch.

Started as ``python -m validator.batch.slot CMD_FD RESULT_FD`` by
:mod:`validator.batch.pool`. It loads the catalogue and the reference once,
starts its own worker :class:`~validator.worker.client.Template`, and then,
for each ``grade`` request, forks a sandboxed worker, grades, and answers with
the report as plain data. Messages on both pipes are JSON only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from validator.worker.protocol import ChannelClosed, Reader, write_message

_SURROGATES = re.compile("[\ud800-\udfff]")


class Slot:
    def __init__(self, config: dict[str, Any]):
        from validator import paths, sandbox
        from validator.reference_side import LiveReference, RememberingReference
        from validator.spec import load_catalogue
        from validator.worker.client import Template

        from validator import rehearsal
        from validator.runner import seed_only_the_cpu

        seed_only_the_cpu()
        rehearsal.ENABLED[0] = True  # a slot grades many submissions with the same calls (validator.rehearsal)
        self.config = config
        self.catalogue = load_catalogue(config.get("challenges_dir") or paths.challenges_dir())
        self.limits = sandbox.Limits(**config["limits"])
        self.lease = sandbox.UidLease() if config.get("isolate", True) and os.geteuid() == 0 else None
        self.box = sandbox.plan(self.limits, hide=config.get("hide", []), files={},
                                uid=self.lease.uid if self.lease else None, isolate=config.get("isolate", True))
        self.template = Template()
        # Imported once and shared by every submission this slot grades (api.grade says why a copy cannot grade).
        ref_file = Path(config.get("reference_dir") or paths.reference_dir()) / "layers.py"
        self.reference = RememberingReference(LiveReference.from_file(ref_file)) if ref_file.exists() else None
        self.scratch = tempfile.TemporaryDirectory(prefix="validator-slot-")
        self.empty_file = Path(self.scratch.name) / "layers.py"
        self.empty_file.write_text("")

    def grade(self, name: str, folder: str, challenges: list[str] | None = None) -> dict[str, Any]:
        from validator.worker.client import TemplateDied

        for attempt in (1, 2):
            try:
                return self._grade(name, Path(folder), challenges)
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

    def _grade(self, name: str, folder: Path, challenges: list[str] | None = None) -> dict[str, Any]:
        from validator.api import grade
        from validator.batch.submissions import Submission
        from validator.questions import AnswersError, id_note
        from validator.worker.client import SandboxedWorker

        sub = Submission(name, folder)
        notes: list[str] = []
        answers: dict = {}
        if os.path.lexists(sub.answers):
            try:
                answers = safe_answers(sub.answers, notes)
            except AnswersError as exc:
                notes.append(f"answers.yaml ignored, its questions earn nothing: {exc}")
        package, files, problems = self._package(sub) if sub.is_package else (None, *sub.intake())
        notebook = None
        if package is None and not os.path.lexists(sub.layers) and sub.notebooks:
            notebook, files, problems = self._notebook(sub)
            if notebook is not None and notebook.answers is not None and not os.path.lexists(sub.answers):
                answers = {cid: dict(qs) for cid, qs in notebook.answers.items()}
        if package is None and notebook is None and not problems and not os.path.lexists(sub.layers):
            problems.insert(0, "the submission has no layers.py")
        layers = sub.folder if package is not None else Path(files["layers.py"]) if notebook is not None \
            else sub.layers
        if problems:  # graded as an empty file: nothing refused is ever parsed, imported or scanned
            notes.extend(f"{p}: the submission is not graded" if "not graded" not in p else p for p in problems)
            layers, files, package, notebook = self.empty_file, {"layers.py": str(self.empty_file)}, None, None
        challenge_ids = challenges or self.config.get("challenges")
        student_id = (self.config.get("student_ids") or {}).get(name, name)  # whose numbers: the platform's id
        note = id_note(answers, student_id, [self.catalogue[c] for c in challenge_ids or self.catalogue])
        if note:
            notes.append(note)
        box = replace(self.box, files=files)
        # A package is imported from the worker's own scratch copy (the sandbox copies `files` in), never from here.
        worker = SandboxedWorker(layers, template=self.template, sandbox=box, budget_s=self.limits.wall_s,
                                 package=package.worker_request(".") if package is not None else None)
        try:
            if notebook is not None:
                notebook.note_import(worker)
            report = grade(layers, challenges=challenge_ids, seed=self.config["seed"], student_id=student_id,
                           profile=self.config["profile"], answers=answers, worker=worker,
                           catalogue=self.catalogue, reference_dir=self.config.get("reference_dir"),
                           student_arg=None, reference_mode="live", reference=self.reference,
                           package=package,
                           fail_fast=bool(self.config.get("fail_fast")))
        finally:
            worker.close()
            if "layers.py" in files and Path(files["layers.py"]).parent.parent == Path(self.scratch.name):
                shutil.rmtree(Path(files["layers.py"]).parent, ignore_errors=True)  # a notebook's staged module
        if notebook is not None:
            notebook.finish(report, student=name)
        if worker.forged:
            void_for_review(report, worker.forged)
        report.student = name
        report.notes = notes + list(report.notes)  # a package's own notes are in the report (see api.grade)
        return scrub(report.to_dict())

    def _notebook(self, sub) -> tuple[Any, dict[str, str], list[str]]:
        """A submission of notebooks: the module their code cells make, written into this slot's scratch
        (what the sandbox copies in, and what the integrity scan reads), or why it is not graded."""
        from validator.notebook import NotebookError, load

        found = sub.notebooks
        try:
            notebook = load(sub.folder, name=found[0].name if len(found) == 1 else "your notebooks")
        except NotebookError as exc:
            return None, {}, [str(exc).replace(str(sub.folder), "your submission")]
        folder = Path(tempfile.mkdtemp(prefix="notebook-", dir=self.scratch.name))
        return notebook, notebook.files(folder), []

    def _package(self, sub) -> tuple[Any, dict[str, str], list[str]]:
        """A submission that is a package with a [tool.validator] mapping: its files, or why it is not graded."""
        from validator.package import MapError, load_package

        try:
            package = load_package(sub.folder, self.catalogue, strict=False)
        except MapError as exc:
            return None, {}, list(exc.problems)
        return package, package.sandbox_files(), []

    def close(self) -> None:
        try:
            self.template.sweep(self.box.uid) if self.box.uid is not None else None
        except Exception:  # noqa: BLE001 - best effort: the uid's keys and processes go with the batch
            pass
        self.template.close()
        self.scratch.cleanup()
        if self.lease:
            self.lease.release()


def void_for_review(report, reason: str) -> None:
    """A submission whose code forged a reply to the grader earns nothing; a person reviews it.

    Every check keeps its message but scores 0 (one that passed now says why it is not credited),
    and the check that caught the forgery (else the first) carries the reason for review.
    """
    checks = [c for ch in report.challenges for c in ch.checks]
    for check in checks:
        if check.score or check.status in ("passed", "advisory"):
            check.status, check.score = "failed", 0.0
            check.message = f"not credited: {reason}" + (f"\n{check.message}" if check.message else "")
    caught = next((c for c in checks if reason in c.message and not c.message.startswith("not credited")),
                  checks[0] if checks else None)
    if caught is not None:
        caught.review.append("a reply to the grader came from another process than the worker (forged)")
    report.notes.append(f"not graded: {reason}")


def safe_answers(path: Path, notes: list[str]) -> dict:
    """A student's answers.yaml within the bounds of :mod:`validator.intake`, single-value answers only.

    A link (to another submission's answers, a root-only file, ``/proc``...) is refused
    without reading its target; so is a file over the size or nesting cap, or one with aliases.
    """
    from validator.intake import IntakeError, read_answers
    from validator.questions import AnswersError

    try:
        answers = read_answers(path, where="answers.yaml")
    except IntakeError as exc:
        raise AnswersError(str(exc)) from None
    for challenge, given in answers.items():
        for question, value in list(given.items()):
            if not (value is None or isinstance(value, (str, int, float, bool))):
                notes.append(f"answers.yaml: {challenge}.{question} is not a single value and was ignored")
                given[question] = None
    return answers


def scrub(obj: Any) -> Any:
    """Strings as any reporter can write them: lone surrogates (from student text) become U+FFFD.

    The whole report is looked at first (JSON's C encoder, one regex search: ~1 ms, where the walk took ~16 ms
    for a catalogue's report); only one that holds a surrogate, or what JSON cannot write, is walked."""
    try:
        text = json.dumps(obj, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return _scrubbed(obj)
    return _scrubbed(obj) if _SURROGATES.search(text) else obj


def _scrubbed(obj: Any) -> Any:
    if isinstance(obj, str):
        return _SURROGATES.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {_scrubbed(k): _scrubbed(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_scrubbed(v) for v in obj]
    return obj


def main(cmd_fd: int, result_fd: int) -> None:
    reader = Reader(cmd_fd)
    config = reader.read()
    try:
        slot = Slot(config)
    except Exception:  # noqa: BLE001 - tell the pool why this slot cannot work
        write_message(result_fd, {"op": "failed", "error": traceback.format_exc(limit=5)})
        return
    write_message(result_fd, {"op": "ready", "degraded": slot.box.degraded + slot.box.weaker, "uid": slot.box.uid})
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
                reply["report"] = slot.grade(request["name"], request["folder"], request.get("challenges"))
            except Exception:  # noqa: BLE001 - a grader failure for this submission; the batch goes on
                reply["internal_error"] = traceback.format_exc(limit=8)
            reply["seconds"] = time.perf_counter() - started
            write_message(result_fd, reply)
            settle_heap()
    finally:
        slot.close()


def settle_heap() -> None:
    """After each submission: :func:`validator.lifetime.freeze_heap` after a full collection.

    What is alive then mostly lives as long as the slot: torch, the catalogue, the reference and its remembered
    results, the replayed cases, the source caches. Frozen only after the first submission, it grew again by
    ~10,000 objects a submission, and the full collections that walked it cost 0.04 CPU-second a submission
    over a long batch; frozen after each, 0.006. The full collection first is cheap (it walks only what the
    last submission left) and keeps its cyclic garbage from being frozen; an object frozen alive that later
    becomes cyclic garbage stays until the slot exits (80 submissions showed no growth it would explain)."""
    from validator import lifetime

    lifetime.freeze_heap(collect=2)


if __name__ == "__main__":
    from validator import lifetime

    lifetime.become_short_lived()  # a process of its own, for one batch
    sys.stdout = sys.stderr  # nothing of the grader's may land on a descriptor the pool reads
    main(int(sys.argv[1]), int(sys.argv[2]))
