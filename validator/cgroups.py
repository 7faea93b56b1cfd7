"""One cgroup per sandboxed worker: a memory limit that counts every page a submission holds.

An address-space limit (``RLIMIT_AS``) is per process and counts only mappings: a
memfd, a file in the worker's tmpfs, a SysV shared-memory segment or a socket
buffer holds memory outside it, and every process the student forks gets a limit of
its own. A memory cgroup counts all of those, for every process in it, and its
out-of-memory killer stops only the processes inside it.

:func:`locate` finds where this process may create cgroups (cgroup v2: an ancestor
of its own cgroup whose children get the ``memory`` controller; v1: its own
``memory`` cgroup, and its ``pids`` one if mounted). :class:`Base` holds one folder
per template process; each worker gets a :class:`Group` in it with the memory limit
(swap included), a process limit, and ``memory.oom.group`` (v2), joins it before any
student code runs (:func:`join`), and the template removes it when the worker ends.
Everything here degrades to "not available" (``locate`` returns None); the sandbox
then keeps its per-process limits and says so.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

PREFIX = "validator-"
STALE_S = 600  # a left-over folder older than this, whose process is gone, is removed


def _read(path: str | Path) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _write(path: str | Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount this process sees."""
    found = []
    for line in _read("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            point = fields[4].replace("\\040", " ")
            found.append((point, tail[0], set(tail[2].split(","))))
    return found


def _own() -> dict[str, str]:
    """This process's cgroup per hierarchy: ``""`` (v2) or a controller name (v1) -> path."""
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            own[name] = path
    return own


def locate() -> dict | None:
    """Where this process may make per-worker cgroups, as plain data; None where it may not.

    ``{"version": 2, "parent": DIR}`` or ``{"version": 1, "memory": DIR, "pids": DIR or None}``.
    Only a parent that is writable (root) is returned; :func:`probe` then checks that a process can join.
    """
    mounts, own = _mounts(), _own()
    for point, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own or own[""].startswith("/.."):
            continue
        here = Path(point + own[""].rstrip("/")) if own[""] != "/" else Path(point)
        # A cgroup with processes cannot give its children controllers (the root excepted): start
        # at the parent of our own, unless ours is the root, and take the first that does.
        candidates = ([here] if here == Path(point) else []) + [p for p in here.parents if _under(p, point)]
        for parent in candidates:
            enabled = _read(parent / "cgroup.subtree_control").split()
            if "memory" in enabled and "pids" in enabled and os.access(parent, os.W_OK):
                return {"version": 2, "parent": str(parent)}
    found: dict = {"version": 1, "memory": None, "pids": None}
    for point, fstype, options in mounts:
        for name in ("memory", "pids"):
            if fstype == "cgroup" and name in options and name in own and not own[name].startswith("/.."):
                folder = Path(point + own[name].rstrip("/")) if own[name] != "/" else Path(point)
                if folder.is_dir() and os.access(folder, os.W_OK):
                    found[name] = str(folder)
    return found if found["memory"] else None


def _under(path: Path, root: str) -> bool:
    return str(path) == root or str(path).startswith(root.rstrip("/") + "/")


def probe(where: dict) -> None:
    """Make a group, limit it, move a child process into it, remove it: raises if any step fails."""
    base = Base(where, name=f"{PREFIX}probe-{os.getpid()}")
    try:
        group = base.group("probe", memory_bytes=64 << 20, pids=8)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            try:
                join(group.dirs)
                os._exit(0 if str(os.getpid()) in group.pids_in() else 1)
            except BaseException:  # noqa: BLE001
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise OSError("a process could not join the probe cgroup")
        group.remove()
    finally:
        base.remove()


def join(dirs: list[str]) -> None:
    """Move the calling process into the group (one folder per hierarchy)."""
    for folder in dirs:
        _write(os.path.join(folder, "cgroup.procs"), str(os.getpid()))


class Base:
    """This process's folder of worker groups (one per hierarchy), removed with :meth:`remove`."""

    def __init__(self, where: dict, name: str | None = None):
        self.version = where["version"]
        name = name or f"{PREFIX}{os.getpid()}"
        parents = [where["parent"]] if self.version == 2 else [where["memory"], where.get("pids")]
        self.dirs = [os.path.join(p, name) for p in parents if p]
        for parent in {os.path.dirname(d) for d in self.dirs}:
            _remove_stale(parent)
        for folder in self.dirs:
            os.makedirs(folder, exist_ok=True)
        if self.version == 2:
            _write(os.path.join(self.dirs[0], "cgroup.subtree_control"), "+memory +pids")
        self.count = 0

    def group(self, name: str, *, memory_bytes: int, pids: int) -> "Group":
        self.count += 1
        group = Group(self.version, [os.path.join(d, name) for d in self.dirs])
        try:
            group.limit(memory_bytes, pids)
        except OSError:
            group.remove()
            raise
        return group

    def remove(self) -> None:
        for folder in self.dirs:
            for child in _children(folder):
                Group(self.version, [child]).remove()
            try:
                os.rmdir(folder)
            except OSError:
                pass


class Group:
    """One worker's cgroup: its folder in each hierarchy (v2: one)."""

    def __init__(self, version: int, dirs: list[str]):
        self.version = version
        self.dirs = dirs
        for folder in dirs:
            os.makedirs(folder, exist_ok=True)

    def _file(self, name: str) -> str | None:
        for folder in self.dirs:
            path = os.path.join(folder, name)
            if os.path.exists(path):
                return path
        return None

    def limit(self, memory_bytes: int, pids: int) -> None:
        if self.version == 2:
            _write(self._file("memory.max"), str(memory_bytes))
            for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if self._file(name):  # no swap accounting, an old kernel: the rest still holds
                    _write(self._file(name), value)
        else:
            _write(self._file("memory.limit_in_bytes"), str(memory_bytes))
            if self._file("memory.memsw.limit_in_bytes"):  # swap accounting on: memory plus swap
                _write(self._file("memory.memsw.limit_in_bytes"), str(memory_bytes))
        if self._file("pids.max"):
            _write(self._file("pids.max"), str(pids))

    def pids_in(self) -> list[str]:
        return _read(os.path.join(self.dirs[0], "cgroup.procs")).split()

    def oom_kills(self) -> int:
        """How many processes the group's out-of-memory killer stopped."""
        text = _read(self._file("memory.events") or "") if self.version == 2 else \
            _read(self._file("memory.oom_control") or "")
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def peak_bytes(self) -> int:
        """The most memory the group ever held (0 where the kernel does not say)."""
        value = _read(self._file("memory.peak" if self.version == 2 else "memory.max_usage_in_bytes") or "")
        return int(value) if value.strip().isdigit() else 0

    def kill(self) -> None:
        """SIGKILL every process in the group (``cgroup.kill`` where the kernel has it)."""
        if self.version == 2 and self._file("cgroup.kill"):
            try:
                _write(self._file("cgroup.kill"), "1")
                return
            except OSError:
                pass
        for folder in self.dirs:
            for pid in _read(os.path.join(folder, "cgroup.procs")).split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass

    def remove(self, *, reap=None, rounds: int = 1) -> bool:
        """Kill what is left in the group and remove it; False while a process in it is still dying."""
        for n in range(rounds):
            self.kill()
            if reap is not None:
                reap()
            left = []
            for folder in self.dirs:
                try:
                    os.rmdir(folder)
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(folder)
            self.dirs = left
            if not left:
                return True
            if n + 1 < rounds:
                time.sleep(0.005 * (n + 1))
        return False


def _children(folder: str) -> list[str]:
    try:
        return [os.path.join(folder, e.name) for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def _remove_stale(parent: str) -> None:
    """Remove the folders a template that was killed left behind (its pid gone, its groups empty)."""
    for folder in _children(parent):
        name = os.path.basename(folder)
        pid = name[len(PREFIX):].split("-")[-1]
        if not name.startswith(PREFIX) or not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        try:
            if os.stat(folder).st_mtime > time.time() - STALE_S:
                continue  # maybe a grader in another pid namespace, just starting: not ours to judge
        except OSError:
            continue
        for child in _children(folder):
            try:
                os.rmdir(child)
            except OSError:
                pass
        try:
            os.rmdir(folder)
        except OSError:
            pass
