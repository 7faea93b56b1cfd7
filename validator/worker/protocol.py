"""Wire format between grader and worker: a JSON header plus raw tensor bytes.

A message is ``[u32 header length][header JSON][u64 len][bytes]...``. Tensors
inside the JSON are replaced by ``{"__tensor__": i, "dtype": .., "shape": ..}``
pointing at the i-th byte buffer. Decoding builds fresh, plain ``torch.Tensor``
objects from those bytes, so nothing the student's process sends can run code
in the grader or lie about equality.

Replies travel on a :func:`channel`: a Unix socket pair whose grader end asks the
kernel for the sender of every byte (``SO_PASSCRED``), so a :class:`Reader` given the
worker's pid refuses anything another process wrote (a child the student's code
forked inherits the worker's end, under whatever number it dups it to) with
:class:`ForgedReply`. The kernel fills in the sender's pid itself, and a process may
claim no pid but its own without ``CAP_SYS_ADMIN``, which a worker does not have.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import socket
import struct
import time
from typing import Any

import torch

MAX_MESSAGE_BYTES = 1 << 30  # default cap for messages between the grader's own processes
# What a reply from student code may cost the grader (see :class:`Reader`): the tensor bytes, the
# JSON header text and the header's nesting. Together they bound one reply to about 1.8x
# REPLY_CAP_BYTES of grader memory (the worst 4 MiB header peaks at 194 MiB decoded),
# read in time linear in its size.
REPLY_CAP_BYTES = 256 << 20
HEADER_CAP_BYTES = 4 << 20
MAX_HEADER_DEPTH = 64

_DTYPES = {
    "float64": torch.float64, "float32": torch.float32, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
    "complex64": torch.complex64, "complex128": torch.complex128,
}
_NAMES = {v: k for k, v in _DTYPES.items()}


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


class ChannelClosed(ProtocolError):
    """The other side closed the channel (a worker that died, usually)."""


class ChannelTimeout(ProtocolError):
    """No complete message arrived before the deadline."""


class ForgedReply(ProtocolError):
    """Bytes on the reply channel that the worker process did not write (or that carried descriptors)."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid


# Where the kernel can name the writer of each message (Linux): replies travel on a socket pair.
CHECKS_SENDER = hasattr(socket, "SO_PASSCRED") and hasattr(socket, "SCM_CREDENTIALS")
_CREDENTIALS = struct.Struct("iII")  # struct ucred: pid, uid, gid


def channel() -> tuple[int, int]:
    """A one-way channel for replies, as ``(grader's end, worker's end)`` descriptors, both non-inheritable.

    A Unix stream socket pair whose grader end receives the sender's credentials with every read
    (see :class:`Reader`'s ``sender``); a pipe where the platform has no such thing.
    """
    if not CHECKS_SENDER:
        return os.pipe()
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # before the worker can write anything
    ours.shutdown(socket.SHUT_WR)  # the grader never writes on it; the worker reads nothing from it
    return ours.detach(), theirs.detach()


_IOV_MAX = 512  # buffers one read scatters into, or one write gathers from (the kernel's limit is 1024)
PIPE_BYTES = 1 << 20  # what Linux lets any process ask of a pipe (/proc/sys/fs/pipe-max-size)


def request_pipe() -> tuple[int, int]:
    """A pipe for requests, ``(read end, write end)``, widened where the platform allows: a submission's
    requests carry ~20 MB of tensors, and through the default 64 KiB a large one took a write and a wake-up
    per 64 KiB (4.2 ms of CPU for 5.6 MB across two processes; 1.7 ms through 1 MiB)."""
    read_end, write_end = os.pipe()
    try:
        import fcntl

        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass  # not Linux, or a lower limit: the default pipe works, only slower
    return read_end, write_end


def watch_process(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (a pidfd), or None where there is none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def dtype_name(dtype: torch.dtype) -> str:
    return _NAMES.get(dtype, str(dtype).removeprefix("torch."))


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except (KeyError, TypeError):  # TypeError: not a name at all (a list in a forged header)
        raise ProtocolError(f"unsupported dtype {name!r}") from None


def plain_tensor(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values as a plain, dense, row-major CPU tensor: ``t`` itself where it already is one (the grader's
    own tensors, mostly), else a copy, so that a subclass or odd strides never reach the bytes read from it."""
    if type(t) is torch.Tensor and t.device.type == "cpu" and t.is_contiguous() and not t.is_conj() and not t.is_neg():
        return t
    # resolve_conj: a conjugated view's memory holds the values before conjugation, and contiguous() keeps the bit
    return torch.Tensor._make_subclass(torch.Tensor, t.detach()).to("cpu").resolve_conj().resolve_neg().contiguous()


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The raw bytes of a tensor's values, in row-major order, as a plain copy.

    Works for every dtype torch has (bfloat16, bool and complex included) and
    needs no numpy, which the CPU wheel of torch does not pull in.
    """
    plain = plain_tensor(t)
    nbytes = plain.numel() * plain.element_size()
    return ctypes.string_at(plain.data_ptr(), nbytes) if nbytes else b""


def _memory_view():
    """``PyMemoryView_FromMemory``, or None where ctypes does not reach Python's C API."""
    try:
        fn = ctypes.pythonapi.PyMemoryView_FromMemory
    except AttributeError:
        return None
    fn.restype, fn.argtypes = ctypes.py_object, (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
    return fn


_VIEW = _memory_view()
_PYBUF_READ = 0x100


def values_view(plain: torch.Tensor) -> memoryview | bytes:
    """The bytes of a :func:`plain_tensor`'s values without copying them: a read-only view of its memory, valid
    only while ``plain`` lives and is not written to (a copy where Python's C API is out of ctypes' reach).

    What the wire and the call keys read megabytes through: a copy of a reply's buffers, then of the message
    they were joined into, cost the worker more than the rest of sending it (benchmarks/bench_wire.py)."""
    nbytes = plain.numel() * plain.element_size()
    if not nbytes:
        return b""
    return _VIEW(plain.data_ptr(), nbytes, _PYBUF_READ) if _VIEW is not None else tensor_bytes(plain)


_AS_IS = frozenset({str, int, bool, type(None)})  # JSON already: returned untouched


def _json_key(k: Any) -> str:
    """A dict key as JSON's encoder writes it (``True`` is ``"true"``), and any other key as its ``str``."""
    if type(k) is str:
        return k
    return "true" if k is True else "false" if k is False else "null" if k is None else str(k)


def _encode(obj: Any, buffers: list[torch.Tensor]) -> Any:
    """``obj`` made JSON: each tensor a description numbering its bytes in ``buffers``, NaN and the infinities
    tagged. The walk :func:`_header` falls back on; its every other value is what the fast path writes."""
    if type(obj) in _AS_IS:  # the plain values first, then the containers: a message is mostly these
        return obj
    if isinstance(obj, dict):
        return {_json_key(k): _encode(v, buffers) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, buffers) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if isinstance(obj, float) and obj != obj:
            return {"__float__": "nan"}
        if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
            return {"__float__": "inf" if obj > 0 else "-inf"}
        return obj
    return _encode_other(obj, buffers)


def _encode_other(obj: Any, buffers: list[torch.Tensor]) -> Any:
    """A value JSON has no type for: a tensor (appended to ``buffers``), a dtype, else its repr."""
    if isinstance(obj, torch.Tensor):
        meta = {"__tensor__": len(buffers), "dtype": dtype_name(obj.dtype),
                "shape": list(obj.shape), "device": str(obj.device)}
        if obj.device.type == "meta":
            meta["__tensor__"] = None
            return meta
        # A dense CPU tensor of the values (a subclass or odd strides can't leak through), read when written.
        buffers.append(plain_tensor(obj))
        return meta
    if isinstance(obj, torch.dtype):
        return {"__dtype__": dtype_name(obj)}
    return repr(obj)


def _header(message: Any, buffers: list[torch.Tensor]) -> bytes:
    """The message's JSON header, its tensors appended to ``buffers`` as :func:`plain_tensor` in the order the
    header numbers them.

    JSON's C encoder walks the message and calls back only for what JSON has no type for: a class's requests
    (~3 KB of JSON around ~15 tensors each) took 52 instead of 73 us a header. Where it stops, at a NaN or an
    infinity (tagged, not written as JSON's non-standard literals) or a key it cannot write, the message is
    walked in Python (:func:`_encode`). Both write the same bytes."""
    try:
        return json.dumps(message, allow_nan=False, default=lambda obj: _encode_other(obj, buffers)).encode()
    except (ValueError, TypeError):
        buffers.clear()
        return json.dumps(_encode(message, buffers), allow_nan=False).encode()


def _decode(obj: Any, buffers: list[bytes]) -> Any:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return _decode_tensor(obj, buffers)
        if "__float__" in obj:
            return float(obj["__float__"])
        if "__dtype__" in obj:
            return dtype_from_name(obj["__dtype__"])
        return {k: _decode(v, buffers) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v, buffers) for v in obj]
    return obj


def _decode_tensor(meta: dict, buffers: list[bytes | bytearray],
                   described: tuple[torch.dtype, list[int], int] | None = None) -> torch.Tensor:
    dtype, shape, nbytes = described if described is not None else _described(meta)
    index = meta["__tensor__"]
    if index is None:
        if len(shape) > 64:
            raise ProtocolError(f"a tensor with {len(shape)} dimensions")
        return torch.empty(shape, dtype=dtype, device="meta")
    if not isinstance(index, int) or not 0 <= index < len(buffers) or buffers[index] is None:
        raise ProtocolError("tensor refers to a missing (or already used) buffer")
    data, buffers[index] = buffers[index], None  # one tensor per buffer: no two share memory
    if len(data) != nbytes:
        raise ProtocolError(f"tensor of shape {shape} and dtype {meta['dtype']} needs {nbytes} bytes, got {len(data)}")
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    if not isinstance(data, bytearray):  # immutable bytes (a fixture file's): torch may only wrap writable memory
        data = bytearray(data)
    return torch.frombuffer(data, dtype=dtype).reshape(shape)  # owns the bytes read: no copy


_ITEMSIZE: dict[torch.dtype, int] = {}


def _described(meta: dict) -> tuple[torch.dtype, list[int], int]:
    """A tensor description's dtype, shape and byte count, or :class:`ProtocolError` where it is not one."""
    dtype = dtype_from_name(meta.get("dtype", ""))
    shape = meta.get("shape")
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    if dtype not in _ITEMSIZE:
        _ITEMSIZE[dtype] = torch.empty((), dtype=dtype).element_size()
    nbytes = _ITEMSIZE[dtype]
    for s in shape:
        nbytes *= s
    return dtype, shape, nbytes


def _pieces(message: Any) -> tuple[list[bytes | memoryview], list[torch.Tensor]]:
    """The message as the pieces it is written in (``[u32 header length][header][u64 len][bytes]...``), each
    tensor's bytes a view of its memory, and the tensors those views read (alive while the pieces are used)."""
    tensors: list[torch.Tensor] = []
    header = _header(message, tensors)
    pieces: list[bytes | memoryview] = [struct.pack("<I", len(header)), header]
    for t in tensors:
        values = values_view(t)
        pieces.append(struct.pack("<Q", len(values)))
        pieces.append(values)
    return pieces, tensors


def pack(message: Any) -> bytes:
    """The message's bytes, as :func:`write_message` writes them."""
    pieces, _tensors = _pieces(message)
    return b"".join(pieces)


def write_message(fd: int, message: Any, deadline: float | None = None) -> None:
    """Write one message, gathered from its pieces (no copy of its tensors' bytes in this process). With a
    deadline the descriptor must be non-blocking: a reader that stops reading (a worker stuck writing replies
    nobody asked for) is a :class:`ChannelTimeout`, never a grader blocked for ever."""
    pieces, _tensors = _pieces(message)  # the tensors stay alive while their views are written
    pending = [memoryview(p) for p in pieces if len(p)]
    done = 0
    while done < len(pending):
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("timed out sending a request to the worker")
            select.select([], [fd], [], left)
        try:
            n = os.writev(fd, pending[done:done + _IOV_MAX])
        except BlockingIOError:
            if deadline is None:
                select.select([], [fd], [])
            continue
        done = _advance(pending, done, n)


def _advance(pending: list[memoryview], done: int, n: int) -> int:
    """Move past the ``n`` bytes one system call took from (or put into) ``pending`` from piece ``done`` on: the
    first piece not finished, the one it stopped in cut to what is left of it."""
    while n:
        head = pending[done]
        if n >= len(head):
            n -= len(head)
            done += 1
        else:
            pending[done] = head[n:]
            n = 0
    return done


class Reader:
    """Reads whole messages from a pipe, with a deadline and size caps.

    ``max_bytes`` caps a message's header plus tensor bytes, ``max_header`` its
    JSON header, ``max_depth`` the header's nesting. Each buffer is read straight
    into its own ``bytearray``, which the decoded tensor then uses (no copy), and
    a length over the cap is refused before anything is read for it, so one
    message costs at most ``max_bytes`` of buffers plus the header's objects
    (a few times ``max_header``). The header must be a JSON object.

    ``sender`` (the grader end of a :func:`channel`): the pid of the only process whose bytes
    are accepted; any read that returns bytes from another, or descriptors, raises
    :class:`ForgedReply`. ``exited`` (a :func:`watch_process` descriptor for the sender): once
    the sender has exited and nothing it wrote is left unread, the channel counts as closed,
    even if a child of it still holds the other end open.
    """

    def __init__(self, fd: int, *, max_bytes: int = MAX_MESSAGE_BYTES, max_header: int = MAX_MESSAGE_BYTES,
                 max_depth: int = 512, sender: int | None = None, exited: int | None = None):
        self.fd = fd
        self.max_bytes = max_bytes
        self.max_header = min(max_header, max_bytes)
        self.max_depth = max_depth
        self.sender = sender
        self.exited = exited
        self._sock = socket.socket(fileno=fd) if sender is not None else None

    def close(self) -> None:
        """Close the descriptor read from (and the exit watch)."""
        if self._sock is not None:
            self._sock.close()
        else:
            try:
                os.close(self.fd)
            except OSError:
                pass
        if self.exited is not None:
            try:
                os.close(self.exited)
            except OSError:
                pass
            self.exited = None

    def _wait(self, deadline: float | None) -> bool:
        """Wait until there is something to read (True), or the deadline passes (False)."""
        watched = [self.fd] + ([self.exited] if self.exited is not None else [])
        if deadline is None:
            if self.exited is None:
                return True  # a blocking read waits by itself
            ready, _, _ = select.select(watched, [], [])
        else:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelTimeout("timed out waiting for the worker")
            ready, _, _ = select.select(watched, [], [], left)
        if self.fd in ready:
            return True
        if self.exited is not None and self.exited in ready:
            raise ChannelClosed("the worker exited (another process still holds its end of the channel)")
        return False

    def _recv(self, views: list[memoryview]) -> int:
        """One read, scattered over ``views`` in order (one system call however many buffers)."""
        if self._sock is None:
            return os.readv(self.fd, views)
        n, ancillary, flags, _ = self._sock.recvmsg_into(views, socket.CMSG_SPACE(_CREDENTIALS.size))
        pid = None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= _CREDENTIALS.size:
                pid = _CREDENTIALS.unpack_from(data)[0]
            elif level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                _close_passed(data)
                flags |= socket.MSG_CTRUNC
        if flags & socket.MSG_CTRUNC:
            raise ForgedReply("descriptors were sent on the reply channel", pid)
        if n and pid != self.sender:
            who = f"process {pid}" if pid else "a process the grader cannot name"
            raise ForgedReply(f"{who} wrote on the reply channel, not the worker (pid {self.sender})", pid)
        return n

    def _take(self, n: int, deadline: float | None) -> bytearray:
        out = [bytearray(n)]
        self._fill(out, deadline)
        return out[0]

    def _fill(self, out: list[bytearray], deadline: float | None) -> None:
        """Fill each buffer of ``out`` in order from the channel, with as few reads as the kernel allows: a
        message's every tensor buffer arrives in one system call where it fits. A channel that closes first
        raises :class:`ChannelClosed` with ``complete``, how many buffers were filled."""
        pending = [memoryview(b) for b in out]
        done = 0
        while done < len(pending):
            if not len(pending[done]):
                done += 1
                continue
            if not self._wait(deadline):
                continue
            k = self._recv(_first_views(pending[done:]))
            if not k:
                closed = ChannelClosed("channel closed")
                closed.complete = done
                raise closed
            done = _advance(pending, done, k)

    def read(self, deadline: float | None = None) -> Any:
        (hlen,) = struct.unpack("<I", self._take(4, deadline))
        if hlen > self.max_header:
            raise ProtocolError(f"message header of {hlen} bytes, over the {self.max_header} the grader accepts")
        try:
            header = json.loads(self._take(hlen, deadline))  # C decoder: deep nesting is a RecursionError
        except RecursionError:
            raise ProtocolError("message header nested too deeply") from None
        except ValueError as exc:
            raise ProtocolError(f"malformed message header: {str(exc)[:200]}") from None
        if not isinstance(header, dict):
            raise ProtocolError(f"message header is a JSON {type(header).__name__}, not an object")
        metas, tagged = _scan(header, self.max_depth)  # every tensor's byte count, from its shape and dtype
        total = hlen + sum(8 + n for n, _ in metas)
        if total > self.max_bytes:
            raise ProtocolError(f"message larger than the grader accepts ({self.max_bytes >> 20} MiB)")
        parts = [bytearray(n) for size, _ in metas for n in (8, size)]
        try:
            self._fill(parts, deadline)
        except ChannelClosed as exc:  # a length that lies, then the end: say which
            _check_lengths(metas, parts[0:getattr(exc, "complete", 0):2])
            raise
        _check_lengths(metas, parts[0::2])
        buffers = parts[1::2]
        try:
            return _decode_in_place(header, tagged, buffers)
        except ProtocolError:
            raise
        except Exception as exc:  # noqa: BLE001 - a field of the wrong type: the sender's fault
            raise ProtocolError(f"undecodable message ({type(exc).__name__}: {str(exc)[:200]})") from None


def _first_views(pending: list[memoryview]) -> list[memoryview]:
    """The buffers the next read may fill: at most ``_IOV_MAX``, and no more than 16 MiB in all."""
    views, room = [], 1 << 24
    for v in pending[:_IOV_MAX]:
        if len(v) >= room:
            views.append(v[:room])
            break
        views.append(v)
        room -= len(v)
    return views


def _check_lengths(metas: list[tuple[int, dict]], lengths: list[bytearray]) -> None:
    """Each buffer's declared length must be the one its tensor's shape and dtype need."""
    for (expected, meta), length in zip(metas, lengths):
        (declared,) = struct.unpack("<Q", length)
        if declared != expected:
            raise ProtocolError(f"tensor of shape {meta.get('shape')} and dtype {meta.get('dtype')} needs "
                                f"{expected} bytes, got {declared}")


def _close_passed(data: bytes) -> None:
    """Close descriptors that arrived in an SCM_RIGHTS message: nothing the worker sends is kept."""
    usable = len(data) - len(data) % 4
    for (fd,) in struct.iter_unpack("i", data[:usable]):
        try:
            os.close(fd)
        except OSError:
            pass


def _scan(header: dict, max_depth: int) -> tuple[list[tuple[int, dict]], list[tuple]]:
    """One walk over a decoded header, without recursion: refuse nesting deeper than ``max_depth`` (every list
    and dict counts, a tensor's description included); return ``(byte count, description)`` of each tensor
    buffer the message carries, in buffer order, the count from the tensor's shape and dtype, and where each
    tagged value sits (a tensor, a float or a dtype, as :func:`_decode` reads them): ``(container, key, tag,
    the tensor's dtype, shape and byte count or None)``, ``container`` None for the header itself. What a tag
    holds is not walked: it is read as :func:`_decode` reads it, then replaced. Each buffer must be named by
    exactly one tensor, and the buffers numbered from 0 without a gap."""
    sizes: dict[int, tuple[int, dict]] = {}
    tagged: list[tuple] = []
    stack: list[tuple[Any, int, Any, Any]] = [(header, 1, None, None)]
    pop, push = stack.pop, stack.append
    while stack:
        item, depth, container, key = pop()
        if depth > max_depth:
            raise ProtocolError(f"message header nested deeper than {max_depth} levels")
        if type(item) is dict:
            if "__tensor__" in item:
                described = _described(item)
                index = item["__tensor__"]
                if index is not None:
                    if type(index) is not int or index < 0 or index in sizes:
                        raise ProtocolError("tensor refers to a missing (or already used) buffer")
                    sizes[index] = (described[2], item)
                tagged.append((container, key, item, described))
                continue
            if "__float__" in item or "__dtype__" in item:
                tagged.append((container, key, item, None))
                continue
            children = item.items()
        else:
            children = enumerate(item)
        depth += 1
        for k, v in children:
            kind = type(v)
            if kind is dict or kind is list:
                push((v, depth, item, k))
    if sorted(sizes) != list(range(len(sizes))):
        raise ProtocolError("tensor refers to a missing (or already used) buffer")
    return [sizes[i] for i in range(len(sizes))], tagged


def _decode_in_place(header: dict, tagged: list[tuple], buffers: list[bytearray]) -> Any:
    """``header`` (freshly parsed, so this reader's own) with each tagged value :func:`_scan` found replaced where it
    sits by what :func:`_decode` makes of it: the same message, without building every dict and list again."""
    for container, key, tag, described in tagged:
        value = _decode_tensor(tag, buffers, described) if described is not None else _decode(tag, buffers)
        if container is None:
            return value
        container[key] = value
    return header


def _count_tensors(obj: Any) -> int:
    count, stack = 0, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "__tensor__" in item:
                count += item["__tensor__"] is not None
            else:
                stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return count
