"""Wire format between grader and worker: a JSON header plus raw tensor bytes.

A message is ``[u32 header length][header JSON][u64 len][bytes]...``. Tensors
inside the JSON are replaced by ``{"__tensor__": i, "dtype": .., "shape": ..}``
pointing at the i-th byte buffer. Decoding builds fresh, plain ``torch.Tensor``
objects from those bytes, so nothing the student's process sends can run code
in the grader or lie about equality.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import struct
import time
from typing import Any

import torch

MAX_MESSAGE_BYTES = 1 << 30  # a student cannot make the grader buffer more than this

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


def dtype_name(dtype: torch.dtype) -> str:
    return _NAMES.get(dtype, str(dtype).removeprefix("torch."))


def dtype_from_name(name: str) -> torch.dtype:
    try:
        return _DTYPES[name]
    except KeyError:
        raise ProtocolError(f"unsupported dtype {name!r}") from None


def tensor_bytes(t: torch.Tensor) -> bytes:
    """The raw bytes of a tensor's values, in row-major order, as a plain copy.

    Works for every dtype torch has (bfloat16, bool and complex included) and
    needs no numpy, which the CPU wheel of torch does not pull in.
    """
    plain = torch.Tensor._make_subclass(torch.Tensor, t.detach()).to("cpu").contiguous()
    nbytes = plain.numel() * plain.element_size()
    return ctypes.string_at(plain.data_ptr(), nbytes) if nbytes else b""


def _encode(obj: Any, buffers: list[bytes]) -> Any:
    if isinstance(obj, torch.Tensor):
        meta = {"__tensor__": len(buffers), "dtype": dtype_name(obj.dtype),
                "shape": list(obj.shape), "device": str(obj.device)}
        if obj.device.type == "meta":
            meta["__tensor__"] = None
            return meta
        # A copy of the bytes of a dense CPU tensor: a subclass or odd strides can't leak through.
        buffers.append(tensor_bytes(obj))
        return meta
    if isinstance(obj, dict):
        return {str(k): _encode(v, buffers) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v, buffers) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        if isinstance(obj, float) and obj != obj:
            return {"__float__": "nan"}
        if isinstance(obj, float) and obj in (float("inf"), float("-inf")):
            return {"__float__": "inf" if obj > 0 else "-inf"}
        return obj
    if isinstance(obj, torch.dtype):
        return {"__dtype__": dtype_name(obj)}
    return repr(obj)


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


def _decode_tensor(meta: dict, buffers: list[bytes]) -> torch.Tensor:
    dtype = dtype_from_name(meta.get("dtype", ""))
    shape = meta.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ProtocolError(f"bad tensor shape {shape!r}")
    index = meta["__tensor__"]
    if index is None:
        return torch.empty(shape, dtype=dtype, device="meta")
    if not isinstance(index, int) or not 0 <= index < len(buffers):
        raise ProtocolError("tensor refers to a missing buffer")
    data = buffers[index]
    numel = 1
    for s in shape:
        numel *= s
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != numel * itemsize:
        raise ProtocolError(f"tensor of shape {shape} and dtype {meta['dtype']} "
                            f"needs {numel * itemsize} bytes, got {len(data)}")
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def pack(message: Any) -> bytes:
    buffers: list[bytes] = []
    header = json.dumps(_encode(message, buffers), allow_nan=False).encode()
    parts = [struct.pack("<I", len(header)), header]
    for b in buffers:
        parts.append(struct.pack("<Q", len(b)))
        parts.append(b)
    return b"".join(parts)


def write_message(fd: int, message: Any) -> None:
    data = memoryview(pack(message))
    while data:
        n = os.write(fd, data)
        data = data[n:]


class Reader:
    """Reads whole messages from a pipe, with a deadline and a size cap."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()

    def _fill(self, n: int, deadline: float | None) -> None:
        while len(self.buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ChannelTimeout("timed out waiting for the worker")
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
            chunk = os.read(self.fd, max(65536, min(n - len(self.buf), 1 << 24)))
            if not chunk:
                raise ChannelClosed("channel closed")
            self.buf += chunk

    def _take(self, n: int, deadline: float | None) -> bytes:
        self._fill(n, deadline)
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def read(self, deadline: float | None = None) -> Any:
        (hlen,) = struct.unpack("<I", self._take(4, deadline))
        if hlen > MAX_MESSAGE_BYTES:
            raise ProtocolError("message header too large")
        try:
            header = json.loads(self._take(hlen, deadline))
        except ValueError as exc:
            raise ProtocolError(f"malformed message header: {exc}") from None
        buffers = []
        total = hlen
        for _ in range(_count_tensors(header)):
            (blen,) = struct.unpack("<Q", self._take(8, deadline))
            total += blen
            if total > MAX_MESSAGE_BYTES:
                raise ProtocolError("message larger than the grader accepts "
                                    f"({MAX_MESSAGE_BYTES >> 20} MiB)")
            buffers.append(self._take(blen, deadline))
        return _decode(header, buffers)


def _count_tensors(obj: Any) -> int:
    if isinstance(obj, dict):
        if "__tensor__" in obj:
            return 0 if obj["__tensor__"] is None else 1
        return sum(_count_tensors(v) for v in obj.values())
    if isinstance(obj, list):
        return sum(_count_tensors(v) for v in obj)
    return 0
