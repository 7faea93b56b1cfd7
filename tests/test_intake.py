"""Bounds on what a submission hands the grader: files, answers, worker replies, hangs, keyrings.

Each test calls the bounding function directly, so it is fast; the same attacks graded
end to end are in tests/test_redteam.py (thorough tier).
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import threading
import time

import pytest
import torch

from validator import sandbox
from validator.batch.slot import safe_answers
from validator.batch.submissions import Submission
from validator.intake import (MAX_ANSWERS_BYTES, MAX_SOURCE_BYTES, IntakeError, parse_answers,
                              read_submission_file)
from validator.questions import AnswersError
from validator.worker.client import Worker, WorkerFailure, reply_reader
from validator.worker.protocol import CHECKS_SENDER, REPLY_CAP_BYTES, ProtocolError, Reader, channel, pack

SECRET = "s3cret-" + os.urandom(4).hex()


# -- files -------------------------------------------------------------------------------------
def test_regular_file_is_read_whole(tmp_path):
    path = tmp_path / "layers.py"
    path.write_bytes(b"x = 1\n")
    assert read_submission_file(path, cap=6) == b"x = 1\n"


def test_symlink_is_refused_without_reading_its_target(tmp_path):
    target = tmp_path / "other.yaml"
    target.write_text(f"secret: {SECRET}\n")
    link = tmp_path / "answers.yaml"
    link.symlink_to(target)
    with pytest.raises(IntakeError, match="symbolic link") as info:
        read_submission_file(link, cap=1 << 20)
    assert SECRET not in str(info.value) and str(target) not in str(info.value)


def test_proc_link_and_folder_and_fifo_are_refused(tmp_path):
    (tmp_path / "environ").symlink_to("/proc/self/environ")
    with pytest.raises(IntakeError, match="symbolic link"):
        read_submission_file(tmp_path / "environ", cap=1 << 20)
    with pytest.raises(IntakeError, match="folder"):
        read_submission_file(tmp_path, cap=1 << 20)
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(IntakeError, match="not a regular file"):
        read_submission_file(tmp_path / "pipe", cap=1 << 20)


def test_size_is_counted_on_bytes_read_not_stat():
    # /proc files stat as 0 bytes but hold content: the cap must still apply.
    assert os.stat("/proc/self/status").st_size == 0
    with pytest.raises(IntakeError, match="larger than"):
        read_submission_file("/proc/self/status", cap=16)


def test_oversized_source_is_refused_after_reading_at_most_the_cap(tmp_path):
    path = tmp_path / "layers.py"
    with open(path, "wb") as fh:
        fh.truncate(50 << 20)  # 50 MB (sparse): never read in full
    started = time.perf_counter()
    with pytest.raises(IntakeError, match="larger than 1 MiB"):
        read_submission_file(path, cap=MAX_SOURCE_BYTES, what="layers.py")
    assert time.perf_counter() - started < 1.0


def test_submission_with_an_oversized_helper_or_layers_is_not_graded(tmp_path):
    (tmp_path / "layers.py").write_text("x = 1\n")
    (tmp_path / "helper.py").write_bytes(b"#" * (MAX_SOURCE_BYTES + 1))
    files, problems = Submission("s", tmp_path).intake()
    assert "helper.py" not in files and problems == ["helper.py is larger than 1 MiB, the limit for a "
                                                     "submitted file: not graded"]
    (tmp_path / "helper.py").unlink()
    files, problems = Submission("s", tmp_path).intake()
    assert set(files) == {"layers.py"} and problems == []


# -- answers -----------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["[" * 30_000, "{a: " * 15_000, "- " * 30_000,
                                  "".join(" " * i + f"k{i}:\n" for i in range(300))],
                         ids=["flow-sequences", "flow-mappings", "block-sequences", "block-mappings"])
def test_deeply_nested_answers_are_refused_fast(text):
    started = time.perf_counter()
    with pytest.raises(IntakeError, match="nested more than"):
        parse_answers(text)
    assert time.perf_counter() - started < 0.5


def test_answers_size_cap_and_aliases():
    with pytest.raises(IntakeError, match="larger than 64 KiB"):
        parse_answers("a: {q: " + "x" * MAX_ANSWERS_BYTES + "}\n")
    with pytest.raises(IntakeError, match="aliases"):
        parse_answers("c:\n  a: &x 1\n  b: *x\n")


def test_brackets_inside_quotes_and_comments_are_plain_text():
    text = "token_embedding:\n  q1: '[[[[[[[[[[[['\n  q2: \"{{{{{{{{{{{\" # [[[[[[[[[[[[[[\n"
    assert parse_answers(text) == {"token_embedding": {"q1": "[" * 12, "q2": "{" * 11}}


@pytest.mark.parametrize("target", ["other", "root_only", "/proc/self/environ"])
def test_symlinked_answers_earn_nothing_and_quote_nothing(tmp_path, target):
    other = tmp_path / "other"
    other.mkdir()
    (other / "answers.yaml").write_text(f"token_embedding:\n  q1: {SECRET}\n")
    secret_file = tmp_path / "root_only.yaml"
    secret_file.write_text(f"token_embedding:\n  q1: {SECRET}\n")
    secret_file.chmod(0o600)
    mine = tmp_path / "mine"
    mine.mkdir()
    link = {"other": other / "answers.yaml", "root_only": secret_file}.get(target, target)
    (mine / "answers.yaml").symlink_to(link)
    os.environ["INTAKE_TEST_SECRET"] = SECRET  # lands in /proc/self/environ
    try:
        with pytest.raises(AnswersError, match="symbolic link") as info:
            safe_answers(mine / "answers.yaml", [])
    finally:
        del os.environ["INTAKE_TEST_SECRET"]
    assert SECRET not in str(info.value)


# -- worker replies ----------------------------------------------------------------------------
def _read(raw: bytes, **caps):
    """Read one message from a pipe fed by a thread (a reply may be larger than the pipe's buffer)."""
    r, w = os.pipe()

    def feed():
        try:
            os.write(w, raw)
        except OSError:
            pass  # the reader refused the message and closed its end
        finally:
            os.close(w)

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        return Reader(r, **caps).read(deadline=time.monotonic() + 5)
    finally:
        os.close(r)
        thread.join()


def _message(header: bytes, tail: bytes = b"") -> bytes:
    return struct.pack("<I", len(header)) + header + tail


def test_reply_header_must_be_an_object():
    with pytest.raises(ProtocolError, match="JSON list"):
        _read(_message(b'[{"ok": true}]'))


def test_deeply_nested_reply_is_refused_fast():
    started = time.perf_counter()
    with pytest.raises(ProtocolError, match="nested"):
        _read(_message(b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(ProtocolError, match="nested"):
        _read(_message(b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"))
    with pytest.raises(ProtocolError, match="nested deeper than 64"):
        _read(_message(b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}"), max_depth=64)
    assert _read(_message(b'{"a": ' + b"[" * 60 + b"]" * 60 + b"}"), max_depth=64)["a"]
    assert time.perf_counter() - started < 1.0


def test_oversized_reply_is_refused_before_it_is_read():
    header = json.dumps({"ok": True, "output": {"__tensor__": 0, "dtype": "uint8", "shape": [1 << 30]}}).encode()
    started = time.perf_counter()
    with pytest.raises(ProtocolError, match="larger than the grader accepts"):
        # claims a 1 GiB buffer and sends none of it: refused on the length alone
        _read(_message(header, struct.pack("<Q", 1 << 30)), max_bytes=REPLY_CAP_BYTES)
    with pytest.raises(ProtocolError, match="header of"):
        _read(struct.pack("<I", 64 << 20), max_bytes=REPLY_CAP_BYTES, max_header=4 << 20)
    assert time.perf_counter() - started < 1.0


def test_reply_fields_of_the_wrong_type_are_protocol_errors():
    for header in ({"x": {"__float__": []}}, {"x": {"__dtype__": [1]}},
                   {"x": {"__tensor__": 0, "dtype": ["f"], "shape": [1]}}):
        with pytest.raises(ProtocolError):
            _read(_message(json.dumps(header).encode(), struct.pack("<Q", 4) + b"\0" * 4))


def test_one_buffer_cannot_back_two_tensors():
    data = bytearray(pack({"a": torch.zeros(2)}))
    header = json.dumps({"a": {"__tensor__": 0, "dtype": "float32", "shape": [2]},
                         "b": {"__tensor__": 0, "dtype": "float32", "shape": [2]}}).encode()
    tail = data[4 + struct.unpack("<I", data[:4])[0]:]
    with pytest.raises(ProtocolError, match="already used|missing"):
        _read(_message(header, bytes(tail) + struct.pack("<Q", 8) + b"\0" * 8))


# -- hangs -------------------------------------------------------------------------------------
class _HangingWorker(Worker):
    """A worker whose calls to ``Slow`` time out; counts what reached the process."""

    def __init__(self):
        super().__init__(__file__)
        self.sent: list[str] = []

    def _ensure_loaded(self):
        return {"ok": True}

    def _roundtrip(self, message, timeout, doing):
        entry = {"execute": lambda: message["call"]["entry"], "execute_many": lambda: message["calls"][0]["entry"],
                 "describe": lambda: message["names"][-1]}[message["op"]]()
        self.sent.append(entry)
        if entry == "Slow":
            raise WorkerFailure("timeout", f"no answer after {timeout:g} s while {doing}")
        return {"ok": True}


def test_a_timed_out_entry_gets_one_short_reprobe_then_is_not_called_again():
    from validator.worker.client import REPROBE_S

    worker = _HangingWorker()
    worker.current_check = "token_embedding/matches_reference"
    with pytest.raises(WorkerFailure, match="no answer after 10 s"):
        worker.request({"op": "execute", "call": {"entry": "Slow"}}, 10)
    worker.current_check = "token_embedding/weight_gradient"
    with pytest.raises(WorkerFailure, match=f"no answer after {REPROBE_S:g} s .*Slow already timed out in check "
                                            "token_embedding/matches_reference, so later calls to it get"):
        worker.request({"op": "execute_many", "calls": [{"entry": "Slow"}, {"entry": "Fast"}]}, 10)
    assert worker.request({"op": "execute", "call": {"entry": "Fast"}}, 10) == {"ok": True}
    with pytest.raises(WorkerFailure, match="not run: Slow already timed out in check "
                                            "token_embedding/matches_reference; see there"):
        worker.request({"op": "describe", "names": ["Fast", "Slow"]}, 10)  # the next challenge's probe
    assert worker.sent == ["Slow", "Slow", "Fast"]
    worker.close()


# -- state left behind -------------------------------------------------------------------------
_libc = ctypes.CDLL(None, use_errno=True)


@pytest.mark.skipif(not sandbox.capabilities()["setuid"] or sandbox._KEYCTL is None,
                    reason="needs root and keyctl")
def test_sweep_empties_the_slot_uids_keyrings():
    lease = sandbox.UidLease()  # the lock every grader takes: no concurrent test shares this uid's keyring
    uid = lease.uid
    found = []
    r, w = os.pipe()

    def add():
        _libc.syscall(ctypes.c_long(248), b"user", b"intake-test", SECRET.encode(), ctypes.c_size_t(len(SECRET)),
                      ctypes.c_long(sandbox.KEY_SPEC_USER_KEYRING))

    def search():
        key = _libc.syscall(ctypes.c_long(sandbox._KEYCTL), ctypes.c_long(10),
                            ctypes.c_long(sandbox.KEY_SPEC_USER_KEYRING), b"user", b"intake-test", ctypes.c_long(0))
        os.write(w, b"1" if key > 0 else b"0")

    sandbox._as_uid(uid, add)
    sandbox._as_uid(uid, search)
    found.append(os.read(r, 1))
    sandbox.sweep(uid)
    sandbox._as_uid(uid, search)
    found.append(os.read(r, 1))
    os.close(r)
    os.close(w)
    lease.release()
    assert found == [b"1", b"0"]  # the key was there for the same uid, and the sweep removed it


def test_a_request_to_a_worker_that_stops_reading_times_out():
    """A full request pipe (the worker stuck writing replies nobody reads) must not block the grader."""
    from validator.worker.protocol import ChannelTimeout, write_message

    r, w = os.pipe()
    os.set_blocking(w, False)
    started = time.perf_counter()
    try:
        with pytest.raises(ChannelTimeout):
            write_message(w, {"x": torch.zeros(1 << 18)}, time.monotonic() + 0.3)  # 1 MiB, nobody reads
    finally:
        os.close(r)
        os.close(w)
    assert time.perf_counter() - started < 2.0


def test_a_reply_to_another_request_is_a_protocol_failure():
    """Replies carry the number of the request they answer; a forged or left-over one is refused."""
    from validator.worker.protocol import write_message

    worker = Worker(__file__)
    req_r, worker.req_fd = os.pipe()
    resp_r, resp_w = os.pipe()
    worker.reader = Reader(resp_r)
    worker.proc = None
    try:
        write_message(resp_w, {"ok": True, "seq": 41})  # left in the pipe before the request is sent
        with pytest.raises(WorkerFailure, match="does not answer the request"):
            worker._roundtrip({"op": "describe", "names": []}, 2, "inspecting layers.py")
    finally:
        for fd in (req_r, resp_w):
            os.close(fd)
        worker.close()


needs_credentials = pytest.mark.skipif(not CHECKS_SENDER, reason="the kernel names a socket's writer on Linux only")


def _child(body) -> int:
    """Fork a child that runs ``body`` and exits; return its pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            body()
        finally:
            os._exit(0)
    return pid


@needs_credentials
def test_a_reply_from_another_process_than_the_worker_is_a_forgery_and_ends_the_submission():
    """Bytes on the reply channel carry their writer's pid: a child's reply (right seq and all) is refused,
    and nothing more is asked of that submission."""
    from validator.worker.protocol import write_message

    worker = Worker(__file__)
    req_r, worker.req_fd = os.pipe()
    resp_r, resp_w = channel()
    worker.reader = reply_reader(resp_r, os.getpid())  # this process plays the worker
    worker.proc = None
    try:
        write_message(resp_w, {"ok": True, "seq": 1})  # the worker's own reply: accepted
        assert worker._roundtrip({"op": "hello"}, 5, "starting the worker") == {"ok": True}
        os.waitpid(_child(lambda: write_message(resp_w, {"ok": True, "seq": 2})), 0)  # a child's, right seq
        with pytest.raises(WorkerFailure, match=r"forged while inspecting layers.py: process \d+ wrote on the "
                                                f"reply channel, not the worker \\(pid {os.getpid()}\\)") as info:
            worker._roundtrip({"op": "describe", "names": []}, 5, "inspecting layers.py")
        assert info.value.reason == "forged" and worker.forged
        with pytest.raises(WorkerFailure, match="not run: a reply to the grader was forged"):
            worker.request({"op": "describe", "names": []}, 5)
    finally:
        for fd in (req_r, resp_w):
            os.close(fd)
        worker.close()


@needs_credentials
def test_descriptors_sent_on_the_reply_channel_are_refused_and_never_kept():
    import socket

    from validator.worker.protocol import ForgedReply

    grader_end, worker_end = channel()
    reader = Reader(grader_end, sender=os.getpid())
    hoard = os.memfd_create("hoard")
    with socket.socket(fileno=worker_end) as sock:
        sock.sendmsg([pack({"ok": True})], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("ii", hoard, hoard))])
    os.close(hoard)
    try:
        with pytest.raises(ForgedReply, match="descriptors"):
            reader.read(time.monotonic() + 5)
        links = [os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                 if os.path.exists(f"/proc/self/fd/{fd}")]
        assert not [link for link in links if "memfd:hoard" in link], links
    finally:
        reader.close()


@needs_credentials
def test_the_worker_exiting_ends_the_channel_though_its_child_holds_it_open():
    """A worker that dies while a child of it keeps the channel open is a crash at once, not a time-out."""
    from validator.worker.protocol import ChannelClosed, watch_process

    grader_end, worker_end = channel()
    release_r, release_w = os.pipe()

    def worker():
        if os.fork() == 0:  # the child: holds worker_end until the test lets it go
            os.close(release_w)
            os.read(release_r, 1)
            os._exit(0)

    pid = _child(worker)
    os.close(worker_end)
    os.close(release_r)
    reader = Reader(grader_end, sender=pid, exited=watch_process(pid))
    try:
        with pytest.raises(ChannelClosed, match="the worker exited"):
            reader.read(time.monotonic() + 30)
    finally:
        os.close(release_w)
        os.waitpid(pid, 0)
        reader.close()


def test_a_forged_reply_voids_the_report_for_review():
    from validator.batch.slot import void_for_review
    from validator.results import ChallengeResult, CheckResult, Report

    reason = "a reply to the grader was forged while running your code: process 7 wrote on the reply channel"
    checks = [CheckResult(id="a", kind="value", status="passed", score=2.0, max_score=2.0, message="ok"),
              CheckResult(id="b", kind="value", status="error", score=0.0, max_score=1.0, message=reason),
              CheckResult(id="c", kind="value", status="error", score=0.0, max_score=1.0, message=f"not run: {reason}"),
              CheckResult(id="q", kind="question", status="passed", score=1.0, max_score=1.0)]
    report = Report(challenges=[ChallengeResult(id="x", title="X", checks=checks)], seed=0, student="s",
                    profile="batch")
    void_for_review(report, reason)
    assert report.score == 0 and report.max_score == 5
    assert [c.status for c in checks] == ["failed", "error", "error", "failed"]
    assert checks[0].message.startswith(f"not credited: {reason}")
    assert report.review == ["x/b: a reply to the grader came from another process than the worker (forged)"]


# -- memory: a cgroup where the machine gives one -----------------------------------------------
def test_cgroup_v2_parent_is_the_nearest_ancestor_that_delegates_memory(tmp_path, monkeypatch):
    """A cgroup with processes cannot give its children controllers: the workers' folder goes under
    the nearest ancestor whose subtree has memory and pids (a sibling of the grader's own cgroup)."""
    from validator import cgroups

    (tmp_path / "system.slice" / "runner.service").mkdir(parents=True)
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    (tmp_path / "system.slice" / "cgroup.subtree_control").write_text("memory pids\n")
    (tmp_path / "system.slice" / "runner.service" / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(cgroups, "_mounts", lambda: [(str(tmp_path), "cgroup2", {"rw"})])
    monkeypatch.setattr(cgroups, "_own", lambda: {"": "/system.slice/runner.service"})
    assert cgroups.locate() == {"version": 2, "parent": str(tmp_path / "system.slice")}
    (tmp_path / "system.slice" / "cgroup.subtree_control").write_text("cpu\n")  # not delegated there: the root
    assert cgroups.locate() == {"version": 2, "parent": str(tmp_path)}
    monkeypatch.setattr(cgroups, "_own", lambda: {"": "/../outside"})  # another cgroup namespace's view
    assert cgroups.locate() is None


def test_without_a_cgroup_the_sandbox_says_its_memory_limit_is_per_process(monkeypatch):
    monkeypatch.setattr(sandbox, "capabilities", lambda: {"root": True, "namespaces": True, "setuid": True,
                                                          "cgroup": None})
    box = sandbox.plan(sandbox.Limits(memory_mb=512), hide=[], files={}, uid=sandbox.FIRST_UID)
    assert box.weaker == [sandbox.NO_CGROUP] and box.degraded == []  # weaker, said, but graded all the same
    assert "512 MB of address space per process (no cgroup)" in sandbox.defences(box)[0]
    where = {"version": 2, "parent": "/sys/fs/cgroup/x"}
    monkeypatch.setattr(sandbox, "capabilities", lambda: {"root": True, "namespaces": True, "setuid": True,
                                                          "cgroup": where})
    box = sandbox.plan(sandbox.Limits(memory_mb=512), hide=[], files={}, uid=sandbox.FIRST_UID)
    assert box.cgroup == where and box.weaker == []
    assert "512 MB of memory for all its processes together, every page counted" in sandbox.defences(box)[0]
    assert sandbox.Sandbox.from_dict(box.to_dict()) == box


@pytest.mark.thorough
@pytest.mark.skipif(sandbox.capabilities()["cgroup"] is None, reason="no memory cgroup can be made on this machine")
def test_a_cgroup_counts_memfd_pages_of_every_process_and_names_the_kill():
    """Memfds, written and never mapped, in a child and its parent: the group's limit counts them,
    its out-of-memory killer stops the worker, the group says so, and it is removed afterwards."""
    from validator import cgroups

    base = cgroups.Base(sandbox.capabilities()["cgroup"], name=f"{cgroups.PREFIX}test-{os.getpid()}")
    group = base.group("w1", memory_bytes=96 << 20, pids=8)

    def hoard(count):
        held = [os.memfd_create("hoard") for _ in range(count)]
        for fd in held:
            os.write(fd, b"\1" * (8 << 20))
        return held

    def worker():
        cgroups.join(group.dirs)
        if os.fork() == 0:
            hoard(8)  # 64 MiB in the child
            time.sleep(60)
            os._exit(0)
        time.sleep(0.2)
        hoard(16)  # 128 more in the worker: over the 96 MiB (even if the child went first)
        time.sleep(60)

    try:
        pid = _child(worker)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == -9
        assert group.oom_kills() >= 1
        assert group.remove(rounds=200)  # the child too: killed with what was left in the group
    finally:
        group.remove(rounds=50)
        base.remove()
    assert not any(os.path.exists(d) for d in base.dirs)
    assert "memory limit of 1024 MB exceeded" in sandbox.describe_signal(9, sandbox.Limits(memory_mb=1024), oom=True)


@pytest.mark.thorough
@pytest.mark.skipif(not (sandbox.capabilities()["namespaces"] and sandbox.capabilities()["setuid"]),
                    reason="the sandbox needs root with namespaces")
def test_sysv_shared_memory_in_the_sandbox_is_capped_at_the_scratch_size():
    """A segment holds memory without a mapping: in the worker's own IPC namespace the kernel's
    (unbounded) defaults are replaced by the scratch size, and the grader's own are left alone."""
    lease = sandbox.UidLease()
    box = sandbox.plan(sandbox.Limits(scratch_mb=32), hide=[], files={}, uid=lease.uid)
    host = open("/proc/sys/kernel/shmmax").read()
    r, w = os.pipe()

    def worker():
        sandbox.enter(box, keep_fds=[w])
        os.write(w, open("/proc/sys/kernel/shmmax").read().encode())

    pid = _child(worker)
    os.close(w)
    try:
        os.waitpid(pid, 0)
        assert int(os.read(r, 100)) == 32 << 20
        assert open("/proc/sys/kernel/shmmax").read() == host
    finally:
        os.close(r)
        lease.release()


def test_worker_forked_from_the_grader_serves_and_dies_cleanly(tmp_path):
    """In a single-threaded grader with torch imported, the worker is forked (no second cold import of
    torch): it imports the student file, answers calls, survives a hang by being killed, and exits."""
    import subprocess
    import sys
    import textwrap

    student = tmp_path / "layers.py"
    student.write_text("import torch\n\ndef f(x):\n    while x.sum() > 100:\n        pass\n    return x * 2\n")
    script = textwrap.dedent(f'''
        import torch
        from validator.worker.client import Worker, WorkerFailure, _ForkedChild
        with Worker({str(student)!r}) as w:
            w.start()
            assert isinstance(w.proc, _ForkedChild), type(w.proc)
            assert w.load()["ok"]
            call = {{"entry": "f", "kind": "function", "inputs": [{{"value": torch.ones(3)}}], "want": ["output"]}}
            reply = w.request({{"op": "execute", "call": call}}, 30)
            assert reply["ok"] and reply["output"].tolist() == [2.0, 2.0, 2.0], reply
            hang = dict(call, inputs=[{{"value": torch.full((3,), 1000.0)}}])
            try:
                w.request({{"op": "execute", "call": hang}}, 2)
            except WorkerFailure as exc:
                assert exc.reason == "timeout", exc
            else:
                raise AssertionError("no time-out")
        print("ok")
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr


# -- a package's tree: what is read, staged and left out ----------------------------------------------
def test_a_package_tree_skips_environments_run_outputs_and_data_folders(tmp_path):
    from validator.package import read_files, read_resources

    root = tmp_path / "repo"
    layout = {
        "cs336_basics/__init__.py": "", "cs336_basics/model.py": "", "cs336_basics/vocab.txt": "a b\n",
        "cs336_basics/data/__init__.py": "", "cs336_basics/data/loader.py": "",  # a package named data: read
        "tests/adapters.py": "", "scripts/train.py": "",
        "data/TinyStories.py": "", "outputs/run1/model.py": "", "checkpoints/x.py": "",  # root outputs: skipped
        "wandb/run-1/files/code/train.py": "", "cs336_basics/wandb/run-2/code.py": "",  # wandb anywhere
        "env/conda-meta/history": "", "env/lib/site.py": "", ".venv/pyvenv.cfg": "", ".venv/lib/x.py": "",
        "venv2/pyvenv.cfg": "", "venv2/lib/y.py": "", "cs336_basics-1.0.dist-info/METADATA": "Name: fake\n",
        "build/lib/cs336_basics/model.py": "", "cs336_basics/__pycache__/model.cpython-311.pyc": "",
        "cs336_basics/fast.cpython-311-x86_64-linux-gnu.so": "", ".DS_Store": "", "cs336_basics/vendor.zip": "",
    }
    for rel, text in layout.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "cs336_basics" / "secrets.json").symlink_to("/etc/hostname")
    files, data, problems = read_files(root)
    assert problems == []
    assert sorted(data) == ["cs336_basics/__init__.py", "cs336_basics/data/__init__.py", "cs336_basics/data/loader.py",
                            "cs336_basics/model.py", "scripts/train.py", "tests/adapters.py"]
    staged, notes = read_resources(root, data)
    assert sorted(staged) == ["cs336_basics/vocab.txt"] and notes == []  # no link, no compiled code, no metadata


def test_data_files_over_the_caps_are_left_out_with_a_note(tmp_path, monkeypatch):
    from validator import package

    monkeypatch.setattr(package, "MAX_DATA_BYTES", 3000)
    monkeypatch.setattr(package, "MAX_DATA_FILES", 3)
    root = tmp_path / "repo"
    (root / "pkg" / "assets").mkdir(parents=True)
    (root / "pkg" / "model.py").write_text("")
    (root / "pkg" / "config.yaml").write_text("d: 4\n")  # next to the code: staged first
    (root / "pkg" / "assets" / "merges.txt").write_bytes(b"m" * 1500)
    (root / "tests" / "fixtures").mkdir(parents=True)
    (root / "tests" / "fixtures" / "corpus.en").write_bytes(b"c" * 1400)
    (root / "tests" / "fixtures" / "tinystories.txt").write_bytes(b"t" * (package.MAX_DATA_FILE_BYTES + 1))
    (root / "README.md").write_text("hi\n")
    staged, notes = package.read_resources(root, {"pkg/model.py": b""})
    assert sorted(staged) == ["README.md", "pkg/config.yaml", "tests/fixtures/corpus.en"]  # then the smaller first
    assert len(notes) == 1
    assert notes[0].startswith("2 non-Python files of the package are not in the grader's copy, so code that reads "
                               "them there will not find them: tests/fixtures/tinystories.txt (1.0 MiB) (over 1 MiB "
                               "each); pkg/assets/merges.txt (past the 3 files or 2 KiB staged for data")


def test_the_sandbox_copies_in_the_staged_bytes_and_worker_notes_are_bounded(tmp_path):
    from validator.package import MAX_NOTE_CHARS, MAX_WORKER_NOTES, StudentPackage

    package = StudentPackage(root=tmp_path, map_file=tmp_path / "pyproject.toml",
                             data={"p/__init__.py": b"x = 1\n"}, resources={"p/v.txt": b"v"},
                             generated={"p-1.dist-info/METADATA": b"Name: p\n"})
    files = package.sandbox_files(tmp_path / "staged")
    assert {rel: sandbox._copy_in(path) for rel, path in files.items()} == {
        "p/__init__.py": b"x = 1\n", "p/v.txt": b"v", "p-1.dist-info/METADATA": b"Name: p\n"}
    assert all(sandbox._safe_relative(rel) for rel in files)
    assert StudentPackage.worker_notes({"notes": ["a" * 5000, 3, *["b"] * 100]}) == \
        ["a" * MAX_NOTE_CHARS] + ["b"] * (MAX_WORKER_NOTES - 2)
    assert StudentPackage.worker_notes({"notes": "not a list"}) == [] == StudentPackage.worker_notes(None)
