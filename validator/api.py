"""The Python API under every command: grade a student file, get a Report (no printing)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from validator import case_store, paths
from validator.grading import Run, grade_challenge
from validator.parallel import grade_all
from validator.profiles import get_settings
from validator.questions import load_key
from validator.reference_side import DEFERRED, FrozenReference, LiveReference, ReferenceSide
from validator.runner import seed_only_the_cpu
from validator.results import ChallengeResult, Report
from validator.spec import Challenge, load_catalogue
from validator.worker.client import Worker


class UsageError(Exception):
    """Bad arguments or inputs; commands print the message and exit with status 2."""


def select_challenges(catalogue: dict[str, Challenge], wanted: Sequence[str] | None) -> list[Challenge]:
    if not wanted:
        return list(catalogue.values())
    unknown = [w for w in wanted if w not in catalogue]
    if unknown:
        raise UsageError(f"unknown challenge {', '.join(unknown)}; available: {', '.join(catalogue)}")
    return [catalogue[w] for w in wanted]


def check_device(device: str | None) -> None:
    """A device the student's layers can run on here, or a usage error that says why not."""
    if device is None:
        return
    try:
        parsed = torch.device(device)
    except RuntimeError as exc:
        raise UsageError(f"--device {device!r} is not a torch device: {exc}") from None
    if parsed.type in ("cpu",):
        return
    if parsed.type == "meta":
        raise UsageError("--device meta cannot be graded: meta tensors hold no values to compare")
    count = _device_count(parsed.type)
    if count is None:
        raise UsageError(f"--device {device}: torch {torch.__version__} has no {parsed.type} backend")
    if count == 0:
        raise UsageError(f"--device {device}: torch {torch.__version__} sees no {parsed.type} device on this machine")
    if parsed.index is not None and parsed.index >= count:
        raise UsageError(f"--device {device}: this machine has {count} {parsed.type} device(s)")


@functools.lru_cache(maxsize=None)
def _device_count(backend: str) -> int | None:
    """How many ``backend`` devices torch sees (None: torch has no such backend), asked in a fresh interpreter.

    Asking here (``torch.cuda.is_available()``) would start the driver in the grading process, and a worker
    forked from it afterwards could never use the device ("Cannot re-initialize CUDA in forked subprocess").
    """
    probe = ("import sys, torch\n"
             f"module = getattr(torch, {backend!r}, None)\n"
             "if module is None or not hasattr(module, 'is_available'): sys.exit(3)\n"
             "print(module.device_count() if module.is_available() else 0)\n")
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"--device: could not ask torch which {backend} devices there are: {exc}") from None
    if done.returncode == 3:
        return None
    try:
        return int(done.stdout.split()[-1])
    except (IndexError, ValueError):
        raise UsageError(f"--device: asking torch which {backend} devices there are failed:\n"
                         f"{(done.stderr or done.stdout).strip()[-2000:]}") from None


def grade(student_file: str | Path, *, challenges: Sequence[str] | None = None, seed: int = 0,
          profile: str = "default", answers: dict[str, dict[str, Any]] | None = None,
          checks: Sequence[str] | None = None, challenges_dir: str | Path | None = None,
          reference_dir: str | Path | None = None, worker: Worker | None = None,
          catalogue: dict[str, Challenge] | None = None, student_arg: str | None = None,
          timeout: float | None = None, on_challenge: Callable[[ChallengeResult], None] | None = None,
          reference_mode: str = "auto", reference: ReferenceSide | None = None,
          device: str | None = None, jobs: int = 1, package: Any = None, fail_fast: bool = False,
          student_id: str | None = None) -> Report:
    """Grade ``student_file`` on the selected challenges and return the plain-data report.

    ``reference_mode``: ``"live"`` runs reference/layers.py, ``"frozen"`` replays the results that
    ``validator regenerate`` froze under challenges/fixtures (a student handout), ``"auto"`` picks
    live when the reference is present. ``reference`` supplies the reference side itself (the
    instructor's recording one); the answer key is still read from ``reference_dir``.
    ``device`` (e.g. ``"cuda"``) runs the student's layers there; the reference stays on the CPU.
    ``jobs`` > 1 grades challenges in that many forked graders, each with its own worker (the CPU only:
    a CUDA context does not survive a fork; and not with a reference side that is not ``fork_safe``);
    results and ``on_challenge`` keep the catalogue order.
    ``package`` (a :class:`validator.package.StudentPackage`, see :func:`validator.package.load_package`)
    grades a student's own package through its mapping; ``student_file`` is then its root. A worker
    passed in must have been made for it (:meth:`StudentPackage.worker_request`).
    ``fail_fast`` stops each challenge at its first check that loses points (see ``grade_challenge``).
    ``student_id`` is whose numbers the questions drawn per student use (official grading: the platform's
    id of the submitter; submit-build: the id set in answers.yaml; none: each question's example numbers).
    """
    import time
    from contextlib import ExitStack

    started = time.perf_counter()
    check_device(device)
    student_file = Path(student_file)
    with ExitStack() as own:  # a worker made here is closed here
        if worker is None:
            worker = own.enter_context(package.staged_worker(student_file) if package is not None
                                       else Worker(student_file))
        if device is not None and hasattr(worker, "use_device"):
            worker.use_device(device)
        worker.start()
        spec_dir = Path(challenges_dir) if challenges_dir else paths.challenges_dir()
        catalogue = catalogue or load_catalogue(spec_dir)
        selected = select_challenges(catalogue, challenges)
        ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
        ref_file = ref_dir / "layers.py"
        notes: list[str] = []
        if reference is not None:
            side, key_all = reference, load_key(ref_dir / "answer_key.yaml")
        elif reference_mode == "frozen" or (reference_mode == "auto" and not ref_file.exists()):
            side, profile, notes = _frozen_reference(spec_dir, selected, seed, profile, ref_file)
            key_all = None
        else:
            if not ref_file.exists():
                raise UsageError(f"no reference at {ref_file}: this copy cannot grade locally")
            side, key_all = LiveReference.from_file(ref_file), load_key(ref_dir / "answer_key.yaml")
        settings = get_settings(profile)
        seed_only_the_cpu()  # the reference runs here: seeding must not cost ~5 ms a call
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # like the worker: sums over repeated IDs come out bit-identical

        run = Run(student_file=student_file, seed=seed, settings=settings, profile=profile,
                  only_checks=frozenset(checks) if checks else None, student_arg=student_arg, timeout=timeout,
                  device=device, package=package, fail_fast=fail_fast, student_id=student_id)

        def grade_one(ch: Challenge, on: Worker) -> ChallengeResult:
            case_store.load(spec_dir, ch.id, profile=profile, seed=seed)  # in the grader that grades it
            return grade_challenge(ch, run=run, worker=on, ref=side, answers=(answers or {}).get(ch.id, {}),
                                   key=None if key_all is None else key_all.get(ch.id, {}))
        try:
            jobs = 1 if device or not getattr(side, "fork_safe", True) else jobs
            recorded = [case_store.seconds(spec_dir, c.id) for c in selected] if jobs > 1 else [None]
            results = grade_all(selected, worker=worker, jobs=jobs, grade_one=grade_one, on_challenge=on_challenge,
                                costs=recorded if None not in recorded else None)  # how forked graders split
        finally:
            torch.set_num_threads(threads)
        if package is not None:  # what staging set aside, and each module the worker replaced by a placeholder
            notes = notes + list(package.notes) + package.worker_notes(getattr(worker, "load_reply", None))
        return Report(challenges=results, seed=seed, student=str(student_file), profile=profile,
                      duration_s=time.perf_counter() - started, notes=notes)


def _frozen_reference(challenges_dir: Path, selected: Sequence[Challenge], seed: int, profile: str,
                      ref_file: Path) -> tuple[FrozenReference, str, list[str]]:
    """Handout mode: load the fixtures; fall back to a recorded profile; say what is deferred."""
    ids = [c.id for c in selected]
    frozen = FrozenReference.load(challenges_dir, ids)
    missing = [i for i in ids if i not in frozen.files]
    if len(missing) == len(ids):
        raise UsageError(f"no reference at {ref_file} and no frozen reference results under "
                         f"{challenges_dir / 'fixtures'}: this copy cannot grade locally")
    notes = [f"no reference implementation here: graded against reference results frozen for seeds "
             f"{', '.join(map(str, frozen.seeds(ids)))}; checks that need the reference itself are "
             f"{DEFERRED}, and questions are recorded and graded at submission"]
    deferred = [f"{cid}/{check}" for cid, fx in frozen.files.items() for check in fx.deferred]
    if deferred:
        notes.append(f"{DEFERRED} (skipped here): {', '.join(deferred)}")
    if missing:
        notes.append(f"no frozen results for {', '.join(missing)}: its reference checks are {DEFERRED}")
    recorded = frozen.profiles(ids)
    if recorded and profile not in recorded:
        fallback = "default" if "default" in recorded else recorded[-1]
        notes.append(f"profile {profile!r} was not recorded for this handout; used {fallback!r}")
        profile = fallback
    if seed not in frozen.seeds(ids):
        notes.append(f"seed {seed} was not recorded, so most reference checks are {DEFERRED}; "
                     f"use one of {', '.join(map(str, frozen.seeds(ids)))}")
    return frozen, profile, notes


def handout_seeds(*, challenges: Sequence[str], challenges_dir: str | Path | None = None,
                  reference_dir: str | Path | None = None) -> list[int] | None:
    """The seeds a handout can grade with (its frozen ones), or None where the reference is present."""
    ref_dir = Path(reference_dir) if reference_dir else paths.reference_dir()
    if (ref_dir / "layers.py").exists():
        return None
    frozen = FrozenReference.load(Path(challenges_dir) if challenges_dir else paths.challenges_dir(), challenges)
    return frozen.seeds(challenges) or None
