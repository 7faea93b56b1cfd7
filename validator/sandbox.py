"""Confine one worker process: its own namespaces and user, a private scratch dir, resource limits.

:func:`enter` runs in a freshly forked worker, before any student code, while
the process is still root. It moves the process into new mount, network, IPC
and UTS namespaces, mounts a private size-limited ``/tmp`` holding the scratch
directory, covers every top-level folder that is not the system's (other
checkouts, homes, ``/srv``, ``/opt``...) with an empty one that holds only the
Python runtime, hides the grader's own paths (reference, answer keys,
submissions, outputs) behind empty read-only mounts, sets resource limits, and
finally drops to an unprivileged uid with no way back (``no_new_privs``).

Each step is used only where this machine allows it (see :func:`capabilities`);
what was skipped is listed in :attr:`Sandbox.degraded` so reports and docs can
say so. Without root, only the limits, the scratch directory and process-group
cleanup apply. Where this machine lets root make cgroups, each worker also gets its
own (see :mod:`validator.cgroups`), so its memory limit counts every page all its
processes hold; elsewhere the limit is per process, on address space only, and
:attr:`Sandbox.weaker` says so. The threat model is in ``docs/batch.md``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import resource
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWNET = 0x00020000, 0x04000000, 0x08000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36

SCRATCH = "/tmp/work"  # inside the worker's private /tmp
FIRST_UID = 61000  # worker uids: unused by any account, one per concurrent worker slot
UID_SLOTS = 4000
LOCK_DIR = Path(tempfile.gettempdir()) / "validator-uids"
# What a worker's cgroup may hold on top of ``--memory``: the worker's own pages, those of the template it
# copies on write (Python writes to every object it touches), the grader's inputs and the replies being
# encoded. Measured: the reference graded on the whole catalogue peaks at 130 MiB in its cgroup, its own
# tensors included (torch 2.13, CPU). With this allowance an honest submission has ``--memory`` and more
# to spare, and a single process that allocates without bound meets its address-space limit (a
# MemoryError, one failed check) before the cgroup's out-of-memory killer (a restarted worker).
WORKER_BASELINE_MB = 256
# Top-level folders a worker keeps as they are; every other one is covered (see _expose).
SYSTEM_ROOTS = frozenset({"bin", "boot", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "run",
                          "sbin", "sys", "tmp", "usr", "var"})


@dataclass
class Limits:
    """What one submission may use. Wall time is enforced by the grader, the rest by the kernel."""

    wall_s: float = 300.0
    cpu_s: int = 300
    memory_mb: int = 2048
    nproc: int = 64
    output_mb: int = 8
    scratch_mb: int = 256
    open_files: int = 256


@dataclass
class Sandbox:
    """The plain-data description the template process gets for each worker it forks."""

    limits: Limits = field(default_factory=Limits)
    uid: int | None = None  # None: keep the grader's user (no root, or isolation off)
    namespaces: bool = False
    hide: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # scratch name -> source path, copied in
    degraded: list[str] = field(default_factory=list)
    # Where each worker gets its own cgroup (validator.cgroups.locate); None: per-process limits only.
    cgroup: dict | None = None
    # Defences that run in a weaker form on this machine: said in the logs, yet grading goes on.
    weaker: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Sandbox":
        return cls(**{**data, "limits": Limits(**data.get("limits", {}))})


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: None if s is None else s.encode())
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


@lru_cache(maxsize=None)
def capabilities() -> dict:
    """What isolation works on this machine, probed once in a throwaway child process.

    ``cgroup`` is where per-worker cgroups can be made (see :func:`validator.cgroups.locate`), or None.
    """
    caps: dict = {"root": os.geteuid() == 0, "namespaces": False, "setuid": False, "cgroup": None}
    if not caps["root"]:
        return caps
    caps["cgroup"] = _probe_cgroup()
    for name, body in (("namespaces", _probe_namespaces), ("setuid", _probe_setuid)):
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                body()
                os._exit(0)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        caps[name] = os.waitstatus_to_exitcode(status) == 0
    return caps


def _probe_namespaces() -> None:
    _unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")


def _probe_cgroup() -> dict | None:
    from validator import cgroups

    where = cgroups.locate()
    if where is None:
        return None
    try:
        cgroups.probe(where)
    except OSError:
        return None
    return where


def _probe_setuid() -> None:
    os.setgroups([])
    os.setresgid(FIRST_UID, FIRST_UID, FIRST_UID)
    os.setresuid(FIRST_UID, FIRST_UID, FIRST_UID)


class UidLease:
    """An unprivileged uid reserved for one worker slot (a lock file, so concurrent graders never share)."""

    def __init__(self):
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
        start = os.getpid() % UID_SLOTS
        for i in range(UID_SLOTS):
            uid = FIRST_UID + (start + i) % UID_SLOTS
            fd = os.open(LOCK_DIR / str(uid), os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.uid, self._fd = uid, fd
            return
        raise RuntimeError("no free worker uid")

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def plan(limits: Limits, *, hide: list[str], files: dict[str, str], uid: int | None,
         isolate: bool = True) -> Sandbox:
    """The strongest sandbox this machine supports; ``degraded`` names what is missing and why."""
    caps = capabilities()
    box = Sandbox(limits=limits, hide=sorted({str(Path(p).resolve()) for p in hide}), files=files)
    if not isolate:
        box.degraded.append("isolation turned off (--no-isolation): student code runs as the grader's user")
        return box
    if not caps["root"]:
        box.degraded.append("not root: student code runs as the grader's user, can read the grader's files, "
                            "and shares its network")
        return box
    box.cgroup = caps["cgroup"]
    if box.cgroup is None:
        box.weaker.append(NO_CGROUP)
    box.namespaces = caps["namespaces"]
    if not box.namespaces:
        box.degraded.append("mount/network namespaces unavailable: grader paths are not hidden")
    if caps["setuid"] and uid is not None:
        box.uid = uid
    else:
        box.degraded.append("cannot switch to an unprivileged uid")
    return box


NO_CGROUP = ("no cgroup on this machine: the memory limit is per process and on address space only (pages of "
             "memfds, files in tmpfs, shared memory and socket buffers are not counted, and each of the "
             "processes a submission may start gets the limit again)")


def defences(box: Sandbox) -> list[str]:
    """The defences a worker planned as ``box`` gets, in words (for logs and results)."""
    if box.cgroup is not None:
        memory = (f"{box.limits.memory_mb} MB of memory for all its processes together, every page counted "
                  f"(a cgroup)")
    else:
        memory = f"{box.limits.memory_mb} MB of address space per process (no cgroup)"
    out = [f"limits ({memory}, {box.limits.cpu_s} s CPU, {box.limits.nproc} processes)",
           "a scratch dir as cwd", "its processes killed after each submission"]
    if box.namespaces:
        out.append("own mount/network/IPC namespaces: grader files hidden, no network")
    if box.uid is not None:
        out.append("an unprivileged uid")
    return out


def close_fds_except(keep: list[int]) -> None:
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 65536)


def enter(box: Sandbox, *, keep_fds: list[int], scratch: str | None = None,
          cgroup: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """Confine the current (freshly forked) process; return the scratch dir and the new environment.

    ``scratch`` is used when there is no private /tmp (no namespaces); the caller removes it.
    ``cgroup`` is the worker's own group (its folder in each hierarchy), made by the caller and joined
    first, so every page the worker touches from here on is counted.
    """
    if cgroup:
        from validator import cgroups

        cgroups.join(cgroup)
    os.setsid()
    close_fds_except(keep_fds)
    contents = {name: _copy_in(src) for name, src in box.files.items()}
    if box.namespaces:
        _unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWNET | CLONE_NEWUTS)
        _limit_shared_memory(box.limits.scratch_mb)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        if box.uid is not None:
            _expose(runtime_dirs(), covers=private_roots())
        for path in box.hide:
            _hide(path)
        # The private /tmp below would hide a Python installed under /tmp (a clone's .venv):
        # hold on to those folders first and bind them back, read-only, once it is mounted.
        under_tmp = _open_dirs(p for p in runtime_dirs() if p.startswith("/tmp/") and not _hidden(p, box.hide))
        try:
            _mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV,
                   f"size={box.limits.scratch_mb}m,mode=0755,nr_inodes=4096")
            _bind_back(under_tmp)
        finally:
            for fd in under_tmp.values():
                os.close(fd)
        for path in ("/var/tmp", "/dev/shm", "/run/lock"):
            if os.path.isdir(path):
                try:
                    _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0555")
                except OSError:
                    pass
        scratch = SCRATCH
        os.makedirs(scratch, mode=0o700, exist_ok=True)
    else:
        scratch = scratch or tempfile.mkdtemp(prefix="validator-scratch-")
    for name, data in contents.items():
        if data is not None and _safe_relative(name):
            dest = os.path.join(scratch, name)
            os.makedirs(os.path.dirname(dest), mode=0o755, exist_ok=True)  # a package's sub-folders
            with open(dest, "wb") as fh:
                fh.write(data)
    if box.uid is not None:
        for root, dirs, names in os.walk(scratch):
            for n in [root] + [os.path.join(root, x) for x in dirs + names]:
                os.chown(n, box.uid, box.uid)
    _set_limits(box.limits)
    if box.uid is not None:
        os.setgroups([])
        os.setresgid(box.uid, box.uid, box.uid)
        os.setresuid(box.uid, box.uid, box.uid)
        fresh_keyrings()
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
    except OSError:
        pass
    os.chdir(scratch)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch, "LANG": "C.UTF-8",
           "USER": "student", "LOGNAME": "student", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
           "VALIDATOR_MEMORY_MB": str(box.limits.memory_mb)}
    return scratch, env


def _safe_relative(name: str) -> bool:
    """A copied-in file's name stays inside the scratch dir: relative, no '..', no empty part."""
    parts = name.split("/")
    return not name.startswith("/") and all(p not in ("", ".", "..") for p in parts)


def runtime_dirs() -> list[str]:
    """What the worker may still read after dropping root: Python, its packages, the grader's code.

    The grader's code (``validator/``) is no secret, a handout ships it; the rest of the
    project (the reference, the key) stays out, except the package folders on ``sys.path``
    that lie inside it (a ``.venv/lib/.../site-packages`` reached through a ``.pth`` file or
    ``PYTHONPATH``): the worker needs the packages wherever they are installed.
    """
    dirs = {sys.base_prefix, sys.prefix, sys.exec_prefix, str(Path(__file__).resolve().parent)}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and not any(entry.startswith(d + os.sep) for d in dirs):
            if not _in_project(entry) or _package_dir(entry):
                dirs.add(entry)
    return sorted(os.path.realpath(d) for d in dirs)


def _in_project(path: str) -> bool:
    from validator.paths import PROJECT_ROOT

    return _under(os.path.realpath(path), str(PROJECT_ROOT.resolve()))


def _package_dir(path: str) -> bool:
    """Where pip installs packages (``site-packages``, Debian's ``dist-packages``)."""
    return any(part in ("site-packages", "dist-packages") for part in Path(path).parts)


def private_roots() -> list[str]:
    """Top-level folders that are not the operating system's, where copies of a project may lie.

    The hide list covers this grader's own reference and key; a second checkout of the
    course repository (a teaching assistant's clone, an old term's folder) would still be
    readable by the worker's uid. Covering every such folder turns the list of what to
    hide into a list of what to show.
    """
    roots = []
    for name in sorted(os.listdir("/")):
        path = "/" + name
        if name not in SYSTEM_ROOTS and not os.path.islink(path) and os.path.isdir(path):
            roots.append(path)
    return roots


def _first_blocker(path: str) -> str | None:
    """The outermost folder on the way to ``path`` that other users cannot enter (e.g. /root)."""
    parts = Path(path).parts
    for i in range(2, len(parts) + 1):
        folder = os.path.join(*parts[:i])
        try:
            if not os.stat(folder).st_mode & 0o001:
                return folder
        except OSError:
            return None
    return None


def _expose(paths: list[str], covers: list[str] = ()) -> None:
    """Cover ``covers`` and every closed folder (like /root) on the way to ``paths``; show ``paths`` again.

    Each covered folder gets an empty tmpfs (hiding all it held), each of ``paths``
    under one is bind-mounted back, read-only, at its usual place, and the cover is
    made read-only last.
    """
    blockers = {b for p in paths if (b := _first_blocker(p))}
    outer = [c for c in sorted(blockers | set(covers), key=len)
             if not any(c.startswith(o + os.sep) for o in blockers | set(covers) if o != c)]
    if not outer:
        return
    fds = _open_dirs(p for p in paths if any(_under(p, c) for c in outer))
    try:
        for cover in outer:
            _mount("tmpfs", cover, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        _bind_back(fds)
        for cover in outer:
            try:
                _mount(None, cover, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
            except OSError:
                pass
    finally:
        for fd in fds.values():
            os.close(fd)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _hidden(path: str, hide: list[str]) -> bool:
    """Whether ``path`` lies in (or is) one of the grader's hidden paths: those stay hidden."""
    return any(_under(path, h) for h in hide)


def _open_dirs(paths) -> dict[str, int]:
    """A handle on each existing folder, valid after something is mounted over the way to it."""
    return {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in paths if os.path.isdir(p)}


def _bind_back(fds: dict[str, int]) -> None:
    """Show each folder again, read-only, at its usual place (under a cover mounted since)."""
    for path, fd in fds.items():
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        try:
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
        except OSError:
            pass


def _copy_in(path: str) -> bytes | None:
    """A submitted file's bytes as :mod:`validator.intake` reads them (no links, capped); None if refused."""
    from validator.intake import MAX_SOURCE_BYTES, IntakeError, read_submission_file

    try:
        return read_submission_file(path, cap=MAX_SOURCE_BYTES)
    except IntakeError:
        return None


def _hide(path: str) -> None:
    """Cover ``path`` with something empty and read-only, so it cannot be read, listed or written."""
    try:
        if os.path.isdir(path):
            _mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,mode=0000")
        elif os.path.exists(path):
            _mount("/dev/null", path, None, MS_BIND)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT,):
            raise


def _limit_shared_memory(megabytes: int) -> None:
    """Cap SysV shared memory in the worker's own IPC namespace at its scratch size (the defaults are
    unbounded; a segment holds memory without a mapping, outside the address-space limit)."""
    pages = megabytes * (1 << 20) // os.sysconf("SC_PAGE_SIZE")
    for name, value in (("shmmax", megabytes << 20), ("shmall", pages), ("shmmni", 64)):
        try:
            with open(f"/proc/sys/kernel/{name}", "w") as fh:
                fh.write(str(value))
        except OSError:
            pass


def _vm_size() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _set_limits(limits: Limits) -> None:
    mb = 1 << 20
    address_space = _vm_size() + limits.memory_mb * mb  # torch is already mapped in; the limit is on top
    settings = [
        (resource.RLIMIT_AS, address_space, address_space),
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 2),
        (resource.RLIMIT_FSIZE, limits.output_mb * mb, limits.output_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, limits.nproc, limits.nproc),
    ]
    for which, soft, hard in settings:
        try:
            resource.setrlimit(which, (soft, hard))
        except (ValueError, OSError):
            pass


def sweep(uid: int, *, rounds: int = 50, reap: Callable[[], None] | None = None) -> int:
    """Kill every process running as ``uid`` (a worker slot's uid); return the rounds it took (0: none ran).

    A child switches to that uid and calls ``kill(-1, SIGKILL)``, which signals
    every process the uid owns at once, so a fork loop cannot outrun it.
    """
    for n in range(rounds):
        if reap is not None:
            reap()  # a killed process stays visible until its zombie is reaped
        if not processes_of(uid):
            _as_uid(uid, clear_keyrings)
            return n
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
                os.kill(-1, signal.SIGKILL)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        time.sleep(0.005)
    return rounds


def _as_uid(uid: int, action: Callable[[], None]) -> None:
    """Run ``action`` in a child process switched to ``uid`` (for what only that uid can do)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            action()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


# keyctl(2): the kernel keyrings outlive processes. The per-uid user keyrings (and the
# persistent one) would carry a key from one submission to the next graded with the same uid.
_KEYCTL = {"x86_64": 250, "aarch64": 219, "i686": 288, "armv7l": 311, "ppc64le": 250, "s390x": 250}.get(os.uname().machine)
KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_GET_PERSISTENT = 1, 7, 22
KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -3, -4, -5


def _keyctl(*args: int) -> int:
    if _KEYCTL is None:
        return -1
    return _libc.syscall(ctypes.c_long(_KEYCTL), *(ctypes.c_long(a) for a in args))


def clear_keyrings() -> None:
    """Empty the calling uid's user, user-session and persistent keyrings (errors ignored: no keyctl, no keys)."""
    _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_KEYRING)
    _keyctl(KEYCTL_CLEAR, KEY_SPEC_USER_SESSION_KEYRING)
    persistent = _keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_SESSION_KEYRING)
    if persistent > 0:
        _keyctl(KEYCTL_CLEAR, persistent)


def fresh_keyrings() -> None:
    """For a worker that just dropped to its uid: empty that uid's keyrings, then join a new session keyring.

    The new anonymous session keyring replaces the one inherited from the grader
    (whose keys the worker would otherwise possess); the uid's own keyrings were
    left behind by an earlier submission in the same slot, if :func:`sweep` missed them.
    """
    clear_keyrings()
    _keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)


def processes_of(uid: int) -> list[int]:
    """Live (non-zombie) processes owned by ``uid``, read from /proc."""
    return list(_states_of(uid))


def _states_of(uid: int) -> dict[int, str]:
    """pid -> state letter (``R``, ``S``, ``T``...) of each live (non-zombie) process owned by ``uid``."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status", "rb") as fh:
                status = fh.read()
        except OSError:
            continue
        at, state_at = status.find(b"\nUid:"), status.find(b"\nState:")
        if at < 0 or state_at < 0 or status[at + 5:status.find(b"\n", at + 1)].split()[:1] != [str(uid).encode()]:
            continue
        state = status[state_at + 7:state_at + 16].strip()[:1].decode()
        if state and state != "Z":
            found[int(entry)] = state
    return found


@contextlib.contextmanager
def paused(uid: int | None, *, rounds: int = 50) -> Iterator[bool]:
    """Every process of ``uid`` (a worker slot's uid) stopped for the block, then continued; yields whether it could.

    While the grader times the reference for a speed check, nothing of the submission may run: processes
    it left running (or woke just before its reply) would compete for the CPU with the reference's timed
    runs and shrink the ratio. A stopped process cannot fork, so a few scans catch every child; processes
    that were already stopped (the student's own doing) are left stopped afterwards. Needs root (the grader
    signals another uid); without a uid of its own the worker runs as the grader and nothing is paused.
    """
    if uid is None or os.geteuid() != 0:
        yield False
        return
    stopped: set[int] = set()
    unreachable: set[int] = set()  # gone, or out of reach (a user namespace): not signalled again
    try:
        for _ in range(rounds):
            running = [pid for pid, state in _states_of(uid).items() if state not in "Tt" and pid not in unreachable]
            if not running:
                break
            for pid in running:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    stopped.add(pid)
                except (ProcessLookupError, PermissionError):
                    unreachable.add(pid)
            time.sleep(0.0002)  # a signalled process on another CPU stops at its next return to user space
        yield True
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass


def describe_signal(sig: int, limits: Limits | None, *, oom: bool = False) -> str | None:
    """What a fatal signal means for a sandboxed worker, in the student's terms.

    ``oom``: the worker's cgroup says its out-of-memory killer ran (the signal is then SIGKILL).
    """
    if limits is None:
        return None
    if oom:
        return (f"memory limit of {limits.memory_mb} MB exceeded: your processes together held more memory "
                "than the limit (it counts everything they hold: tensors, Python objects, memfds, files in "
                "/tmp, shared memory), and the kernel stopped them")
    return {
        signal.SIGXCPU: f"CPU time limit of {limits.cpu_s} s exceeded",
        signal.SIGXFSZ: f"output size limit of {limits.output_mb} MB exceeded (printing too much, or a file "
                        "too large in the scratch directory)",
        signal.SIGKILL: f"killed, by your own code or by a limit (memory {limits.memory_mb} MB, "
                        f"CPU {limits.cpu_s} s, {limits.nproc} processes)",
    }.get(sig)


def set_subreaper() -> None:
    try:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
    except OSError:
        pass
