"""The worker process: imports the student's layers.py and executes calls for the grader.

Started as ``python -m validator.worker.main REQ_FD RESP_FD``. Its stdout and
stderr are redirected by the grader; requests and responses travel on the two
inherited descriptors only (a pipe, and a socket whose grader end checks that
every reply comes from this process: see :mod:`validator.worker.protocol`), so
nothing a student prints, nor any process it starts, can be mistaken for a response.

Started as ``python -m validator.worker.main --template CTRL_FD`` it is a
template instead: it imports torch and the worker once, never any student
code, and forks one sandboxed worker per ``spawn`` request (see
:class:`validator.worker.client.Template`), so a worker starts in milliseconds.
It also makes each worker's cgroup, where the sandbox has them, reads what
the cgroup saw (an out-of-memory kill) when the worker ends, and removes it.
"""

from __future__ import annotations

import fcntl
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback

_STUDENT_FILE: str | None = None  # set in a sandboxed worker: its own copy of layers.py, whatever the grader names
_STAGED_ROOT: str | None = None  # set in a sandboxed worker: its scratch dir, where a package's files were copied


def _load_student(path: str) -> tuple[dict, dict]:
    from validator.runner import install_thread_counter

    install_thread_counter()  # before student code runs, so a thread it starts is always counted
    spec = importlib.util.spec_from_file_location("student_layers", path)
    if spec is None or spec.loader is None:
        return {}, {"type": "ImportError", "mro": ["ImportError"], "message": f"cannot import {path}"}
    module = importlib.util.module_from_spec(spec)
    sys.modules["student_layers"] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any failure at import is reported, not raised
        return {}, _import_failure(exc, path, path)
    return vars(module), {}


def _import_failure(exc: BaseException, origin: str, shown: str) -> dict:
    """What importing a student's module raised. A SyntaxError has no frame in the student's file, so it
    is located by its own file and line (``shown``: the file as the student knows it)."""
    from validator.runner import exception_info

    info = exception_info(exc, origin=origin)
    if isinstance(exc, SyntaxError):
        info["where"] = [{"file": shown, "line": exc.lineno or 0, "function": "<module>",
                          "code": (exc.text or "").rstrip()}]
        info["message"] = exc.msg
    return info


def _load_package(root: str, targets: dict) -> tuple[dict, dict, list[str]]:
    """Import a student's package from its staged root: ``challenge.Entry -> [module, attr]``.

    Returns the namespace (qualified names, plus each contract name that only one challenge
    uses), one error per entry that could not be found, and notes for the report (each module
    the grader's environment lacks, replaced by a placeholder: see :mod:`validator.worker.imports`).
    A module that fails to import costs only the entries it holds.
    """
    from validator.runner import install_thread_counter

    install_thread_counter()
    package = _staged_package(root)
    namespace: dict = {}
    errors: dict = {}
    modules: dict = {}
    for qualified, (module_name, attr) in sorted(targets.items()):
        if module_name not in modules:
            modules[module_name] = _import_staged(package, module_name)
        found = modules[module_name]
        if isinstance(found, dict):
            errors[qualified] = found
        elif not hasattr(found, attr):
            errors[qualified] = {"type": "AttributeError", "mro": ["AttributeError"], "where": [],
                                 "message": f"module {module_name} has no attribute {attr!r}"}
        else:
            namespace[qualified] = getattr(found, attr)
    plain: dict = {}
    for qualified, obj in namespace.items():
        plain.setdefault(qualified.partition(".")[2], []).append(obj)
    namespace.update({name: objs[0] for name, objs in plain.items() if len(objs) == 1})
    return namespace, errors, package.notes()


_PACKAGE = None  # the worker's StagedPackage, once a package was loaded (one per process)


def _staged_package(root: str):
    """The import machinery for the staged root, installed once per worker process."""
    global _PACKAGE
    from validator.worker.imports import StagedPackage

    if _PACKAGE is None:
        _PACKAGE = StagedPackage(root)
        _PACKAGE.install()
    return _PACKAGE


def _import_staged(package, module_name: str):
    """``module_name`` imported from the staged package, or the import's failure as plain data.

    A module that resolves outside the staged root (its name is an installed module's) is a clash.
    """
    try:
        module = package.import_module(module_name)
    except BaseException as exc:  # noqa: BLE001 - reported for the entries of this module only
        return _import_failure(exc, package.root, _relative(getattr(exc, "filename", None) or "", package.root))
    where = os.path.abspath(getattr(module, "__file__", None) or "")
    return module if where.startswith(package.root) else _clash(module_name, where)


def _adapt(namespace: dict, errors: dict, adapters: dict, targets: dict) -> None:
    """Entries reached through tests/adapters.py: each becomes the adapter functions that reach it."""
    from validator.adapter_runner import AdaptedEntry

    for qualified, data in adapters.items():
        if qualified in errors or qualified not in namespace:
            continue
        first = namespace[qualified]
        module = sys.modules.get(targets[qualified][0])
        functions = {v["function"]: getattr(module, v["function"]) for v in data["variants"]
                     if module is not None and callable(getattr(module, v["function"], None))}
        entry = AdaptedEntry(functions, data)
        namespace[qualified] = entry
        plain = qualified.partition(".")[2]
        if namespace.get(plain) is first:
            namespace[plain] = entry


def _module_notes(namespace: dict) -> dict:
    """What a module generated from a notebook says about its own import (validator/notebook.py): the
    imports that failed and the cells that raised, as ``{"notes": [...]}``; nothing for any other module."""
    notes = namespace.get("__validator_notes__")
    if not isinstance(notes, list):
        return {}
    return {"notes": [str(n)[:600] for n in notes[:50]]}


def _relative(filename: str, origin: str) -> str:
    return filename[len(origin):] if filename.startswith(origin) else os.path.basename(filename)


def _clash(module_name: str, where: str) -> dict:
    return {"type": "ImportError", "mro": ["ImportError"], "where": [],
            "message": f"{module_name} resolved to {where or 'a built-in module'}, outside your package: its name "
                       "clashes with an installed module; rename your package"}


def serve(req_fd: int, resp_fd: int) -> None:
    import torch

    from validator.runner import (describe_entry, exception_info, execute, seed_only_the_cpu,
                                  skip_dynamo_disable_shims)
    from validator.worker.protocol import ChannelClosed, Reader, write_message

    torch.set_num_threads(int(os.environ.get("VALIDATOR_WORKER_THREADS", "1")))
    _detach_channel_on_fork(req_fd, resp_fd)
    seed_only_the_cpu()
    skip_dynamo_disable_shims()
    memory_mb = int(os.environ.get("VALIDATOR_MEMORY_MB", "0") or 0)
    reader = Reader(req_fd)
    namespace: dict = {}
    origin: str | None = None
    while True:
        try:
            request = reader.read()
        except ChannelClosed:
            return
        op = request.get("op")
        try:
            if op == "hello":
                reply = {"ok": True, "pid": os.getpid(), "torch": torch.__version__}
            elif op == "load" and request.get("package"):
                root = _STAGED_ROOT or request["package"]["root"]
                origin = os.path.join(os.path.abspath(root), "")
                adapters = request["package"].get("adapters") or {}
                if adapters:  # before any of the package is imported (and its builtins copied): classes are watched
                    from validator.adapter_runner import watch_classes
                    watch_classes(origin)
                namespace, errors, notes = _load_package(root, request["package"]["targets"])
                _adapt(namespace, errors, adapters, request["package"]["targets"])
                reply = {"ok": True, "exception": None, "entry_errors": errors, "notes": notes,
                         "names": sorted(k for k in namespace if not k.startswith("_"))}
            elif op == "load":
                origin = os.path.abspath(_STUDENT_FILE or request["path"])
                namespace, error = _load_student(origin)
                reply = {"ok": not error, "exception": error or None,
                         "names": sorted(k for k in namespace if not k.startswith("_")), **_module_notes(namespace)}
            elif op == "describe":
                reply = {"ok": True, "entries": {n: describe_entry(namespace.get(n))
                                                 for n in request["names"]}}
            elif op == "execute":
                reply = execute(namespace, request["call"], origin)
            elif op == "execute_many":
                reply = {"ok": True, "results": [execute(namespace, c, origin)
                                                 for c in request["calls"]]}
            elif op == "exit":
                write_message(resp_fd, {"ok": True})
                return
            else:
                reply = {"ok": False, "stage": "protocol", "exception": {
                    "type": "ValueError", "mro": ["ValueError"], "message": f"unknown op {op!r}"}}
        except BaseException as exc:  # noqa: BLE001 - the loop must answer, whatever happened
            reply = {"ok": False, "stage": "worker", "exception": exception_info(exc, origin)}
        if memory_mb:
            _note_memory_limit(reply, memory_mb)
        if _device_broken(reply):
            reply["restart"] = True  # the client replaces this process: the device is unusable now
        if isinstance(reply, dict):
            reply["seq"] = request.get("seq")  # which request this answers (see Worker._roundtrip)
        try:
            write_message(resp_fd, reply)
        except BaseException as exc:  # noqa: BLE001 - e.g. an output that cannot be encoded
            write_message(resp_fd, {"ok": False, "stage": "encode", "seq": request.get("seq"),
                                    "exception": exception_info(exc, origin)})


def _detach_channel_on_fork(*fds: int) -> None:
    """A child that student code forks (``os.fork``, ``multiprocessing``) finds /dev/null where the
    grader's channel was, so one that falls back into this loop reads the end of input and exits,
    instead of answering the grader. A courtesy for honest code only: code that dups the descriptors
    first, or forks without Python, keeps them; the grader refuses replies from any process but
    this one (see :class:`validator.worker.protocol.Reader`)."""

    def detach() -> None:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in fds:
            os.dup2(null, fd)
        os.close(null)

    os.register_at_fork(after_in_child=detach)


_OOM_WORDS = ("not enough memory", "can't allocate memory", "cannot allocate memory", "out of memory")


def _note_memory_limit(obj, memory_mb: int) -> None:
    """Say which limit an allocation failure hit, so the student knows it was the grader's cap."""
    if isinstance(obj, list):
        for v in obj:
            _note_memory_limit(v, memory_mb)
        return
    if not isinstance(obj, dict):
        return
    info = obj.get("exception")
    if isinstance(info, dict):
        message = str(info.get("message", ""))
        if info.get("type") == "MemoryError" or any(w in message.lower() for w in _OOM_WORDS):
            info["message"] = f"memory limit {memory_mb} MB exceeded: {message}"[:2200]
    for key in ("results",):
        if isinstance(obj.get(key), list):
            _note_memory_limit(obj[key], memory_mb)


_STICKY_DEVICE_WORDS = ("device-side assert", "CUDA error", "illegal memory access")
DEVICE_SIDE_HINT = ("on a GPU an out-of-range index is a device-side assert (no IndexError), and it leaves "
                    "the device unusable: check the range yourself and raise IndexError before indexing")


def _device_broken(obj) -> bool:
    """Whether a reply reports an accelerator error after which this process cannot compute any more.

    A device-side assert (an out-of-range index on CUDA) poisons the CUDA context for good;
    every later call would fail with the same error, so one bug would cost every check. The
    message gets a hint, and the reply asks for a fresh process.
    """
    found = False
    if isinstance(obj, dict):
        info = obj.get("exception")
        if isinstance(info, dict) and ("AcceleratorError" in info.get("mro", []) or any(
                w in str(info.get("message", "")) for w in _STICKY_DEVICE_WORDS)):
            if "device-side assert" in str(info.get("message", "")) and DEVICE_SIDE_HINT not in info["message"]:
                info["message"] = f"{info['message'].splitlines()[0]} ({DEVICE_SIDE_HINT})"
            found = True
        for item in obj.get("results") or []:  # execute_many: one reply per call
            found = _device_broken(item) or found
    return found


# Lines torch's profiler writes to fd 2 on its own (its first start and stop): nobody's output.
PROFILER_NOISE = ("USDT:",)


def _prepare_template() -> None:
    """Import everything a worker needs, so forked workers never read the grader's files again.

    What the warm-up writes to fd 2 is passed on, less torch's profiler notices (a batch's every slot
    and every `submit-build` would print them once).
    """
    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            _warm()
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        kept = [line for line in captured.read().decode("utf-8", "replace").splitlines(True)
                if not line.startswith(PROFILER_NOISE)]
    if kept:
        sys.stderr.write("".join(kept))
        sys.stderr.flush()


def _warm() -> None:
    import torch  # noqa: F401
    import torch.nn.functional  # noqa: F401
    from torch.utils import _python_dispatch  # noqa: F401

    from validator import adapter_runner, runner, sandbox  # noqa: F401
    from validator.worker import imports, protocol  # noqa: F401

    runner.seed_only_the_cpu()
    runner.skip_dynamo_disable_shims()
    # The first trace warms lazily built dispatch and profiler state: pay that once, here, before forking.
    weight = torch.nn.Parameter(torch.nn.init.trunc_normal_(torch.empty(4, 3)))
    call = {"entry": "f", "kind": "function", "inputs": [{"value": torch.tensor([0, 2, 2])}],
            "want": ["output"], "trace_ops": True, "track_memory": True, "grad_output": torch.ones(3, 3)}
    runner.execute({"f": lambda ids: weight[ids] * 1.0}, call)


def warm_meta_device() -> None:
    """The first operation on the meta device (a layer's ``device="meta"`` check) imports sympy for
    torch's meta kernels, about 0.7 s: a process that forks many workers pays it once for them all.
    Call after :func:`_prepare_template`, which switches off the dynamo shims (no dynamo import)."""
    import torch

    with torch.no_grad():
        torch.nn.init.normal_(torch.empty(2, 2, device="meta")).mul(2.0)  # elementwise dtype rules: sympy


def template(ctrl_fd: int) -> None:
    """Serve spawn/wait/sweep requests from the grader until it closes the control socket.

    A batch's slot forks a worker per submission from here, so the meta device is warmed too."""
    from validator import lifetime, sandbox

    lifetime.keep_freed_memory()  # each fork is a worker for one submission
    _prepare_template()
    warm_meta_device()
    sandbox.set_subreaper()
    sock = socket.socket(fileno=ctrl_fd)
    live: dict[int, dict] = {}   # pid -> {"scratch": dir or None, "uid": uid or None, "group": its cgroup or None}
    done: dict[int, int] = {}    # pid -> Popen-style return code
    ended: dict[int, dict] = {}  # pid -> what its cgroup saw: {"oom": killed for memory, "peak_mb": ...}
    uids: set[int] = set()
    groups = _Groups()

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
            info = live.pop(pid, None)
            if info is None:
                continue  # an orphan of some worker, reparented to us
            done[pid] = os.waitstatus_to_exitcode(status)
            if info.get("scratch"):
                shutil.rmtree(info["scratch"], ignore_errors=True)
            if info.get("group") is not None:
                ended[pid] = groups.ended(info["group"])
        if groups.dying:
            groups.tidy()  # an ended worker's group, once its last process is reaped

    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 20, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            break
        request = json.loads(data)
        op = request.get("op")
        reply: dict = {"ok": True}
        try:
            if op == "hello":
                reply["pid"] = os.getpid()
            elif op == "spawn":
                box = sandbox.Sandbox.from_dict(request["sandbox"])
                group = groups.new(box)
                try:
                    pid = _spawn(box, request.get("student", "layers.py"), fds, sock, group)
                except BaseException:
                    if group is not None:
                        group.remove()
                    raise
                live[pid] = {"scratch": _spawn.last_scratch, "uid": box.uid, "group": group}
                if box.uid is not None:
                    uids.add(box.uid)
                reply["pid"] = pid
            elif op == "wait":
                deadline = time.monotonic() + float(request.get("timeout", 0))
                pid = int(request["pid"])
                while True:
                    reap()
                    if pid in done or pid not in live or time.monotonic() >= deadline:
                        break
                    time.sleep(0.005)
                reply["status"] = done.pop(pid, None) if pid in done else (None if pid in live else "unknown")
                reply.update(ended.pop(pid, {}) if reply["status"] is not None else {})
            elif op == "sweep":
                reply["rounds"] = sandbox.sweep(int(request["uid"]), reap=reap)
                reap()
            elif op == "exit":
                break
            else:
                reply = {"ok": False, "error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - report to the grader, keep serving
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        finally:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
        sock.send(json.dumps(reply).encode())
    for pid in list(live):
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    for uid in uids:
        sandbox.sweep(uid, reap=reap)
    reap()
    groups.close(reap)


class _Groups:
    """The template's per-worker cgroups (see :mod:`validator.cgroups`): made at spawn, removed once empty."""

    def __init__(self):
        self.base = None
        self.dying: list = []  # groups of ended workers, removed once their last process is reaped

    def new(self, box):
        """A cgroup for the next worker, limited as ``box`` says; None where the sandbox has none."""
        from validator import cgroups, sandbox

        if box.cgroup is None:
            return None
        if self.base is None:
            self.base = cgroups.Base(box.cgroup)
        return self.base.group(f"w{self.base.count + 1}",
                               memory_bytes=(box.limits.memory_mb + sandbox.WORKER_BASELINE_MB) << 20,
                               pids=box.limits.nproc)

    def ended(self, group) -> dict:
        """What the group saw, read once its worker ended; then what it still holds is killed."""
        seen = {"oom": group.oom_kills() > 0, "peak_mb": group.peak_bytes() >> 20}
        group.kill()
        self.dying.append(group)
        return seen

    def tidy(self) -> None:
        self.dying = [g for g in self.dying if not g.remove()]

    def close(self, reap) -> None:
        for n in range(50):
            reap()  # tidies too
            if not self.dying:
                break
            time.sleep(0.005 * (n + 1))
        if self.base is not None:
            self.base.remove()


def _spawn(box, student_name: str, fds: list[int], ctrl: socket.socket, group=None) -> int:
    """Fork one worker: confine it (in its own cgroup, ``group``, where there is one), then serve the
    grader on the passed descriptors."""
    from validator import sandbox

    if len(fds) != 3:
        raise ValueError("spawn needs the request, response and log descriptors")
    req_fd, resp_fd, log_fd = fds
    scratch = None
    if not box.namespaces:
        scratch = tempfile.mkdtemp(prefix="validator-scratch-")
        if box.uid is not None:
            os.chown(scratch, box.uid, box.uid)
    _spawn.last_scratch = scratch
    pid = os.fork()
    if pid:
        return pid
    try:  # the worker: never returns
        ctrl.close()
        # Park the pipes high, then move them to fixed low numbers so every other descriptor can be closed.
        req_fd, resp_fd, log_fd = (fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for fd in (req_fd, resp_fd, log_fd))
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.dup2(req_fd, 3)
        os.dup2(resp_fd, 4)
        directory, env = sandbox.enter(box, keep_fds=[3, 4], scratch=scratch,
                                       cgroup=group.dirs if group is not None else None)
        os.environ.clear()
        os.environ.update(env)
        tempfile.tempdir = None  # the template cached /tmp; a lazily imported library (torch's inductor cache on
        # a meta-device init) must find the sandbox's TMPDIR, its scratch dir, instead of an unwritable /tmp path
        _clean_sys_path()
        global _STUDENT_FILE, _STAGED_ROOT
        _STUDENT_FILE = os.path.join(directory, student_name)
        _STAGED_ROOT = directory
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        serve(3, 4)
        os._exit(0)
    except BaseException:  # noqa: BLE001
        try:
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(70)


_spawn.last_scratch = None


def _clean_sys_path() -> None:
    """Drop the grader's folders (and the current dir) from sys.path; torch's site-packages stay."""
    from validator.paths import PROJECT_ROOT

    root = str(PROJECT_ROOT)
    keep = []
    for entry in sys.path:
        if entry in ("", "."):
            continue
        if entry == root or (entry.startswith(root + os.sep) and "site-packages" not in entry
                             and "dist-packages" not in entry and "/lib/python" not in entry):
            continue
        keep.append(entry)
    sys.path[:] = keep
    for name in list(sys.modules):
        if name == "reference" or name.startswith("reference."):
            del sys.modules[name]
    importlib.invalidate_caches()


if __name__ == "__main__":
    if sys.argv[1] == "--template":
        template(int(sys.argv[2]))
    else:
        serve(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)
