"""What a check needs to grade one challenge: the spec, both sides, and call builders.

The student side is always reached through the worker (plain data in, plain
tensors out); the reference side is whatever the run chose (validator/reference_side.py):
live in-process, recording, or replayed from fixtures.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from hypothesis import settings as Settings

from validator.cases import Case
from validator.draws import seeded_normal
from validator.spec.schema import Challenge, Entry, resolve
from validator.worker.client import Worker

if TYPE_CHECKING:
    from validator.reference_side import ReferenceSide


class CheckFailed(Exception):
    """The student's code was observed doing the wrong thing."""


class CheckErrored(Exception):
    """The student's code could not be observed (it raised, hung or died)."""


class GraderFailure(CheckErrored):
    """The grader's own machinery failed on this layer (e.g. loading test weights); not a student exception."""


class CheckSkipped(Exception):
    """The check has nothing to observe (another check owns the cause); the message says why."""


class NotGraded(CheckSkipped):
    """The check cannot observe this entry the way it is reached (through a repository's tests/adapters.py):
    it is reported as not graded, with the reason, and counts for nothing either way."""


# Keys of a call that make the run yield evidence about how the layer computes (ops, memory, time over several
# passes): such a call goes through validator.checks.evidence.measured, which grades the run's output as well,
# so that a layer cannot behave one way when measured and another when graded.
EVIDENCE_KEYS = ("trace_ops", "track_memory", "repeat")

NOT_GRADED_STAGE = "not_graded"  # a worker reply's stage when a call cannot be made through the adapter


class ReferenceUnavailable(Exception):
    """Handout mode: the frozen reference holds no result for a call made outside a hypothesis search."""


GRADER_STAGES = ("load", "lookup")


def is_grader_failure(result: dict) -> bool:
    """The call failed in the grader's own machinery (loading test weights), not in student code."""
    return not result.get("ok", True) and result.get("stage") in GRADER_STAGES


# torch's words for a mistake, and what they mean in a layer (appended to the error where they appear)
_TORCH_HINTS = (
    ("a leaf Variable that requires grad is being used in an in-place operation",
     "your code changes a tensor that needs gradients in place: an input it was given (x -= x.max(...)) or a "
     "parameter; compute into a new tensor instead (x = x - ...): a layer leaves its inputs as they are"),
)


def format_exception(result: dict, entry: str) -> str:
    entry = result.get("entry_label") or entry  # a package's own name for it (set in the grader, see Context)
    info = result.get("exception") or {}
    stage = result.get("stage", "call")
    if stage == "load":
        return ("the grader could not load its test weights into your layer, so this check could not run "
                f"(not an exception of your code): {info.get('message', '')}")
    doing = {"construct": f"{entry}(...) raised", "forward": f"calling {entry} raised",
             "backward": "backward() raised", "load": "loading the weights failed:",
             "lookup": "lookup failed:", "inspect": "inspecting the module raised",
             "train": "switching train/eval mode raised",
             "to_device": "moving the layer with .to(device) raised",
             "stand_ins": "the grader's stand-in sublayers could not be used:"}.get(stage, f"{stage} raised")
    text = f"{doing} {info.get('type', 'an exception')}: {info.get('message', '')}".rstrip(": ")
    text += "".join(f" ({hint})" for needle, hint in _TORCH_HINTS if needle in str(info.get("message", "")))
    where = [w for w in info.get("where", []) if w.get("line")]
    if where:
        last = where[-1]
        file = last["file"] if not Path(last["file"]).is_absolute() else Path(last["file"]).name  # a package's
        text += f"\n  at {file}:{last['line']} in {last['function']}: {last.get('code', '')}"    # relative path
    elif info.get("student_frames") is False:
        text += "\n  (no line of your file is on the stack: it was raised inside PyTorch or Python, called from your code)"
    return text


@dataclass
class Context:
    challenge: Challenge
    ref: "ReferenceSide"
    worker: Worker
    student_file: Path
    seed: int
    settings: Settings
    entries: dict[str, dict] = field(default_factory=dict)
    param_maps: dict[str, dict[str, str] | None] = field(default_factory=dict)
    timeout_cap: float | None = None
    # Where the student's layer runs (e.g. "cuda"); the reference and every comparison stay on the CPU.
    device: str | None = None
    # The hypothesis profile of this run, so a reproduce line replays the same inputs.
    profile: str | None = None
    # Figures the running check drew (plain data, e.g. an init histogram); run_check moves them to its result.
    figures: list = field(default_factory=list)
    # A student's own package graded through a mapping (validator.package.StudentPackage), else None.
    package: Any = None
    # Why an entry's parameters could not be matched to the contract's (a tie of shapes, ...), by entry.
    param_problems: dict[str, str] = field(default_factory=dict)
    # Entries whose parameters tie in shape with nothing to tell them apart: no test weights can be loaded.
    ambiguous: set[str] = field(default_factory=set)
    # entries reached through an adapter some of whose test weights are in no parameter of the layer it builds
    # (stored changed, or not loaded): see weights_unreadable
    unreadable: set[str] = field(default_factory=set)
    # The value and gradient checks of this challenge that failed so far (grade_challenge keeps it): a layer known
    # to compute wrong values, whose wrong measured run is that bug, not a sign of behaving differently when measured.
    wrong_values: list[str] = field(default_factory=list)
    # Shared measured runs (validator.checks.evidence.measured) whose values were shown to be the layer's, by call key:
    # two checks that judge the same traced run (a composite's own bans and its parts') run it once.
    measured_runs: dict[str, dict] = field(default_factory=dict)
    # The calls of this challenge's last passing run in this process, sent ahead in batches (validator.rehearsal);
    # None: every call is its own round trip.
    rehearsal: Any = None

    # -- a student's package -------------------------------------------------
    def target(self, entry_name: str):
        """The package's object for an entry (validator.package.Target), or None for layers.py."""
        return self.package.target(self.challenge.id, entry_name) if self.package is not None else None

    def adapted(self, entry_name: str) -> bool:
        """Whether the entry is reached through the repository's tests/adapters.py (validator.adapters)."""
        target = self.target(entry_name)
        return target is not None and target.adapter is not None

    def label(self, entry_name: str) -> str:
        """How messages name the student's object: ``cs336_basics.model:MyEmbedding``, or the entry's name."""
        target = self.target(entry_name)
        return target.label if target is not None else entry_name

    def explicit_parameters(self, entry_name: str) -> dict[str, str]:
        """Contract parameter name -> the student's, as the package's mapping names them."""
        if self.package is None:
            return {}
        return self.package.parameters.get(self.challenge.id, {}).get(entry_name, {})

    def _timeout(self, timeout: float) -> float:
        return min(timeout, self.timeout_cap) if self.timeout_cap else timeout

    def check_seed(self, check_id: str) -> int:
        """A per-check seed, so one check's cases don't depend on which others ran."""
        return (self.seed * 1_000_003 + zlib.crc32(f"{self.challenge.id}/{check_id}".encode())) % (2**32)

    # -- calls ---------------------------------------------------------------
    def expected_parameters(self, entry: Entry, dims: dict[str, int]) -> dict[str, tuple[int, ...]]:
        return {name: tuple(int(resolve(d, dims)) for d in shape)
                for name, shape in entry.parameters.items()}

    def make_state(self, entry: Entry, dims: dict[str, int], seed: int,
                   dtype: torch.dtype) -> dict[str, torch.Tensor]:
        shapes = self.expected_parameters(entry, dims)
        return dict(zip(shapes, seeded_normal(list(shapes.values()), seed, dtype)))

    def build_call(self, entry_name: str, case: Case, *, want: list[str],
                   state: dict[str, torch.Tensor] | None = None, grad_output: torch.Tensor | None = None,
                   train: bool | None = False, init_kwargs: dict | None = None,
                   default_dtype: str | None = None, input_dtype: torch.dtype | None = None,
                   seed: int | None = None, reseed: bool = True, keep_dtypes: bool = False, **extra: Any) -> dict:
        """One call of ``entry_name`` on ``case``, as plain data both sides run the same way.

        A module is built in one explicit dtype, ``param_dtype``: ``dtype=`` when the call passes it, else
        ``default_dtype``, else the grader's default. The runner converts any parameter the build left in
        another floating dtype to it, before the test weights are loaded, so a layer that ignores ``dtype=``
        or the default dtype computes in the dtype the check is about and loses only the dtype checks
        (which pass ``keep_dtypes=True``: they look at the layer as built).
        """
        entry = self.challenge.entries[entry_name]
        inputs = []
        for name in entry.call:
            value = case.inputs[name]
            spec = self.challenge.inputs[name]
            if isinstance(value, torch.Tensor) and input_dtype is not None and value.dtype.is_floating_point:
                value = value.to(input_dtype)
            inputs.append({"value": value, "requires_grad": bool(spec.requires_grad)})
        call = {"entry": entry_name, "kind": entry.kind, "inputs": inputs, "want": want,
                "seed": (case.seed if seed is None else seed) if reseed else None,
                "init_args": [resolve(a, case.dims) if isinstance(a, str) else a for a in entry.init],
                "init_kwargs": {**{k: (resolve(v, case.dims) if isinstance(v, str) else v)
                                   for k, v in entry.init_kwargs.items()}, **(init_kwargs or {})},
                "default_dtype": default_dtype, "grad_output": grad_output,
                "train": train if entry.kind == "module" else None, "state": state,
                "_dims": dict(case.dims)}  # grader-side only (see for_student); keys starting with _ are not sent
        if entry.kind == "module" and not keep_dtypes:
            built = call["init_kwargs"].get("dtype")
            built = built if isinstance(built, torch.dtype) else None
            call["param_dtype"] = str(built or (getattr(torch, default_dtype) if default_dtype else
                                                torch.get_default_dtype())).removeprefix("torch.")
        call.update(extra)
        return call

    def for_student(self, call: dict) -> dict:
        """Rename expected parameter names to the student's (matched by name or shape)."""
        if call.get("state") and call["entry"] in self.ambiguous:
            raise CheckErrored(f"the grader cannot load its test weights into {self.label(call['entry'])}: "
                               f"{self.param_problems.get(call['entry'], '')}")
        mapping = self._param_map(call)
        adapted = self.adapted(call["entry"])
        dims = call.get("_dims")
        call = {k: v for k, v in call.items() if not k.startswith("_")}
        if adapted and not call.get("state") and self.challenge.entries[call["entry"]].parameters:
            # an adapter always loads weights: give it test weights of the call's dtype (its init checks read
            # what the constructor made, recorded before the adapter loads them)
            call["state"] = self.make_state(self.challenge.entries[call["entry"]], dims or {}, call.get("seed") or 0,
                                            _call_dtype(call))
        if self.device is not None and "device" not in call:  # a call may pin its device (timing does)
            call = dict(call, device=self.device)
        if self.package is not None:  # the worker holds the package's objects under "challenge.Entry"
            entry = self.challenge.entries[call["entry"]]
            call = dict(call, entry=f"{self.challenge.id}.{call['entry']}")
            if entry.kind == "module" and not adapted:
                call["contract_order"] = [str(a) for a in entry.init] + list(entry.accepts)
        if call.get("state"):
            call = dict(call, state={mapping.get(k, k): v for k, v in call["state"].items()})
        return call

    def student(self, call: dict, timeout: float, doing: str = "running your code", *, evidence: bool = False) -> dict:
        """The student's result for ``call``; a call that yields evidence (EVIDENCE_KEYS) must say so
        (``evidence=True``, which only validator.checks.evidence.measured passes: it grades the run's output)."""
        _refuse_ungraded_evidence([call], evidence)
        self._refuse_unreadable_weights([call])
        timeout = self._timeout(timeout)

        def send() -> dict:
            return self.worker.request({"op": "execute", "call": self.for_student(call)}, timeout, doing)

        if self.rehearsal is None:
            reply = send()
        elif evidence:
            reply = self.rehearsal.other(send)
        else:
            reply = self.rehearsal.call(call, timeout, send)
        return self._rename_back(call, _raise_if_not_graded(reply))

    def student_many(self, calls: list[dict], timeout: float, doing: str = "running your code") -> list[dict]:
        _refuse_ungraded_evidence(calls, False)
        self._refuse_unreadable_weights(calls)

        def send() -> dict:
            return self.worker.request({"op": "execute_many", "calls": [self.for_student(c) for c in calls]},
                                       self._timeout(timeout), doing)

        reply = send() if self.rehearsal is None else self.rehearsal.many(calls, timeout, send)
        if not reply.get("ok"):
            raise CheckErrored(format_exception(reply, calls[0]["entry"]))
        return [self._rename_back(c, _raise_if_not_graded(r)) for c, r in zip(calls, reply["results"])]

    def backward_known_broken(self) -> bool:
        """Whether a gradient check of this challenge already failed or raised: a later check that runs backward
        only on the way to what it judges (how the layer computes, state across calls) leaves it out, so that
        the one bug costs the gradient check that names it (see grade_challenge's ``wrong_values``)."""
        kinds = {c.id: c.kind for c in self.challenge.checks} if self.challenge is not None else {}
        return any(kinds.get(c) == "gradient" for c in self.wrong_values)

    def weights_unreadable(self, entry_name: str) -> bool:
        """Whether the entry is reached through an adapter and the probe found some test weight in no parameter of
        the layer it builds (stored changed, or not loaded: see grading._probe)."""
        return entry_name in self.unreadable

    def _refuse_unreadable_weights(self, calls: list[dict]) -> None:
        """A check that reads the layer's weights (their values, gradients or sublayers) cannot be made where they
        are unreadable (:meth:`weights_unreadable`); a measured run leaves them out (validator.checks.evidence)."""
        for call in calls:
            if self.weights_unreadable(call["entry"]) and (call.get("stand_ins") or {
                    "params", "params_before", "params_after", "param_grads"} & set(call.get("want", ()))):
                raise NotGraded(self.param_problems.get(call["entry"]) or "the test weights are not in the layer")

    def _param_map(self, call: dict) -> dict[str, str]:
        """Contract parameter name -> the student's, for this call.

        Under stand-ins (validator/standins.py) each stood-in sublayer holds the contract's inner
        names under the student's attribute for it: the contract's ``attn.q_proj.weight``, which the
        student calls ``attention.wq.W``, is ``attention.q_proj.weight`` in that call.
        """
        mapping = self.param_maps.get(call["entry"]) or {}
        if not call.get("stand_ins"):
            return mapping
        return {c: s.split(".", 1)[0] + "." + c.split(".", 1)[1] if "." in c and "." in s else s
                for c, s in mapping.items()}

    def _rename_back(self, call: dict, reply: dict) -> dict:
        mapping = self._param_map(call)
        back = {v: k for k, v in mapping.items()}
        for key in ("param_grads", "params", "params_before", "params_after"):
            if isinstance(reply.get(key), dict):
                reply[key] = {back.get(k, k): v for k, v in reply[key].items()}
        if isinstance(reply, dict):
            reply.pop("entry_label", None)  # only the grader names things
            target = self.target(call["entry"])
            if target is not None:
                adapter = reply.pop("adapter", None)
                known = target.adapter is not None and isinstance(adapter, str) and any(
                    v["function"] == adapter for v in target.adapter["variants"])
                reply["entry_label"] = f"{target.module}:{adapter}" if known else self.label(call["entry"])
        return reply

    def reference_call(self, call: dict) -> dict:
        """The reference's result for ``call``; its failing is a spec or reference bug."""
        result = self.ref.call(self.challenge.id, call)
        if not result.get("ok"):
            raise RuntimeError("the reference failed on a generated case (a spec or reference bug): "
                               + format_exception(result, call["entry"]))
        return result

    def reference_raw(self, call: dict) -> dict:
        """The reference's result for ``call``, as it is (a check that expects it to raise reads this)."""
        return self.ref.call(self.challenge.id, call)


def _refuse_ungraded_evidence(calls: list[dict], evidence: bool) -> None:
    if evidence:
        return
    for call in calls:
        keys = [k for k in EVIDENCE_KEYS if (int(call.get(k) or 1) > 1 if k == "repeat" else call.get(k))]
        if keys:
            raise RuntimeError(f"a call with {', '.join(keys)} yields evidence and must be made through "
                               "validator.checks.evidence.measured, which compares the measured run's output "
                               "with the reference's (a grader bug, not the student's)")


def _raise_if_not_graded(reply: dict) -> dict:
    if isinstance(reply, dict) and not reply.get("ok", True) and reply.get("stage") == NOT_GRADED_STAGE:
        raise NotGraded((reply.get("exception") or {}).get("message", "this check cannot be made here"))
    return reply


def _call_dtype(call: dict) -> torch.dtype:
    """The dtype a call builds its layer in: ``dtype=`` if it passes one, else its default dtype, else float32."""
    from validator.worker.protocol import dtype_from_name

    given = (call.get("init_kwargs") or {}).get("dtype")
    if isinstance(given, torch.dtype):
        return given
    if call.get("default_dtype"):
        return dtype_from_name(call["default_dtype"])
    return torch.get_default_dtype()
