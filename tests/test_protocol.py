"""The wire format: tensors round-trip bit-exactly; malformed or oversized replies are refused."""

import os
import struct

import pytest
import torch

from validator.worker.protocol import ProtocolError, Reader, pack, write_message


def roundtrip(message):
    r, w = os.pipe()
    try:
        write_message(w, message)
        os.close(w)
        return Reader(r).read(deadline=None)
    finally:
        os.close(r)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.bool])
def test_tensors_roundtrip_bit_exactly(dtype):
    t = (torch.randn(3, 4) * 100).to(dtype)
    back = roundtrip({"x": t, "nested": [t[0], {"y": t.T}]})
    assert back["x"].dtype == dtype and torch.equal(back["x"], t)
    assert torch.equal(back["nested"][1]["y"], t.T)


def test_zero_size_scalar_meta_and_special_floats():
    msg = {"empty": torch.empty(0, 3), "scalar": torch.tensor(2.5), "meta": torch.empty(2, 2, device="meta"),
           "nan": float("nan"), "inf": float("-inf"), "dtype": torch.float64}
    back = roundtrip(msg)
    assert back["empty"].shape == (0, 3) and back["scalar"].item() == 2.5
    assert back["meta"].device.type == "meta" and back["meta"].shape == (2, 2)
    assert back["nan"] != back["nan"] and back["inf"] == float("-inf")
    assert back["dtype"] is torch.float64


def _raw(header: dict, buffers: list[bytes]) -> bytes:
    text = __import__("json").dumps(header).encode()
    return struct.pack("<I", len(text)) + text + b"".join(struct.pack("<Q", len(b)) + b for b in buffers)


def test_a_read_message_is_what_the_recursive_decoder_makes_of_it():
    """Reader.read replaces each tagged value where it sits in the parsed header (protocol._scan): the same message
    as protocol._decode, which builds every dict and list again, for tensors at any depth, the header itself a
    tensor, floats and dtypes in lists, and tags inside tags (a tensor description's own keys are not read)."""
    import copy
    import json

    from validator.worker import protocol

    f32 = {"dtype": "float32", "shape": [2]}
    header = {"a": {"__tensor__": 0, **f32}, "l": [1, {"__float__": "nan"}, [{"__dtype__": "int64"}, "x"]],
              "d": {"deep": [{"k": {"__tensor__": 1, **f32}}], "m": {"__tensor__": None, "dtype": "bool", "shape": [3]}},
              "t": {"__tensor__": 2, **f32, "extra": {"__float__": "inf"}}, "f": {"__float__": "-inf", "__dtype__": "x"},
              "n": None, "s": "__tensor__"}
    buffers = [struct.pack("<2f", k, k + 0.5) for k in range(3)]
    got = _fed(_raw(header, buffers), chunk=7)
    expected = protocol._decode(copy.deepcopy(header), [bytearray(b) for b in buffers])
    def shown(obj):
        if isinstance(obj, torch.Tensor):
            return [str(obj.dtype), obj.device.type, list(obj.shape), obj.tolist() if obj.device.type != "meta" else None]
        return repr(obj)

    assert json.dumps(got, default=shown) == json.dumps(expected, default=shown)
    assert "NaN" in json.dumps(got, default=shown) and "torch.int64" in json.dumps(got, default=shown)
    assert got["l"][1] != got["l"][1] and got["l"][2][0] is torch.int64 and got["d"]["m"].device.type == "meta"
    root = _fed(_raw({"__tensor__": 0, **f32}, buffers[:1]), chunk=64)
    assert isinstance(root, torch.Tensor) and root.tolist() == [0.0, 0.5]
    with pytest.raises(ProtocolError, match="undecodable"):  # a float tag holding a tag: as the recursive decoder
        _fed(_raw({"x": {"__float__": {"__float__": "nan"}}}, []), chunk=64)


def test_a_tensor_subclass_arrives_as_a_plain_tensor():
    class Liar(torch.Tensor):
        def __eq__(self, other):  # pragma: no cover - must never be called by the grader
            return True

    liar = torch.Tensor._make_subclass(Liar, torch.zeros(3))
    back = roundtrip({"out": liar})
    assert type(back["out"]) is torch.Tensor


def test_inconsistent_byte_count_is_a_protocol_error():
    data = bytearray(pack({"x": torch.zeros(4)}))
    header_len = struct.unpack("<I", data[:4])[0]
    data[4 + header_len:4 + header_len + 8] = struct.pack("<Q", 12)  # claims 12 bytes for 16
    r, w = os.pipe()
    os.write(w, bytes(data[:4 + header_len + 8 + 12]))
    os.close(w)
    with pytest.raises(ProtocolError, match="needs 16 bytes"):
        Reader(r).read()
    os.close(r)


def test_garbage_header_is_a_protocol_error():
    r, w = os.pipe()
    os.write(w, struct.pack("<I", 5) + b"{nope")
    os.close(w)
    with pytest.raises(ProtocolError, match="malformed"):
        Reader(r).read()
    os.close(r)


def _fed(data: bytes, *, chunk: int) -> object:
    """Read one message from a pipe that a thread fills ``chunk`` bytes at a time."""
    import threading

    r, w = os.pipe()

    def feed():
        try:
            for i in range(0, len(data), chunk):
                os.write(w, data[i:i + chunk])
        finally:
            os.close(w)

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        return Reader(r).read(deadline=None)
    finally:
        thread.join()
        os.close(r)


def test_every_buffer_of_a_message_arrives_whole_however_the_bytes_are_split():
    """The reader scatters a message's tensor buffers over as few reads as it can: more buffers than one read
    takes, empty ones among them, one larger than a read's 16 MiB, and bytes that trickle in one at a time."""
    many = {"t": [torch.full((k % 3,), float(k)) for k in range(1200)], "big": torch.arange(5 << 20, dtype=torch.int32)}
    back = _fed(pack(many), chunk=1 << 20)
    assert all(torch.equal(a, b) for a, b in zip(back["t"], many["t"])) and len(back["t"]) == 1200
    assert torch.equal(back["big"], many["big"])
    small = {"a": torch.randn(3, 2), "e": torch.empty(0), "b": torch.arange(5), "m": torch.empty(2, device="meta")}
    got = _fed(pack(small), chunk=1)
    assert torch.equal(got["a"], small["a"]) and torch.equal(got["b"], small["b"]) and got["e"].shape == (0,)
    assert got["m"].device.type == "meta"


def test_buffers_must_be_numbered_without_a_gap():
    import json

    header = json.dumps({"a": {"__tensor__": 0, "dtype": "float32", "shape": [1]},
                         "b": {"__tensor__": 2, "dtype": "float32", "shape": [1]}}).encode()
    data = struct.pack("<I", len(header)) + header + (struct.pack("<Q", 4) + b"\0" * 4) * 2
    with pytest.raises(ProtocolError, match="missing"):
        _fed(data, chunk=1 << 16)


@pytest.mark.skipif(not hasattr(__import__("fcntl"), "F_GETPIPE_SZ"), reason="pipe sizes are Linux's")
def test_the_request_pipe_is_widened_and_carries_a_message_larger_than_it():
    """A submission's requests carry ~20 MB of tensors: the request pipe holds 1 MiB, not the default 64 KiB,
    and a message larger than that still arrives whole (read while it is written)."""
    import fcntl
    import threading

    from validator.worker.protocol import PIPE_BYTES, request_pipe

    r, w = request_pipe()
    try:
        assert fcntl.fcntl(w, fcntl.F_GETPIPE_SZ) >= PIPE_BYTES
        big = torch.randn(3 * PIPE_BYTES // 4)  # three times the pipe
        got = []
        reader = threading.Thread(target=lambda: got.append(Reader(r).read(deadline=None)))
        reader.start()
        write_message(w, {"x": big})
        reader.join(timeout=60)
        assert got and torch.equal(got[0]["x"], big)
    finally:
        os.close(r)
        os.close(w)


def test_what_is_written_is_packs_bytes_whatever_the_tensors():
    """write_message writes byte for byte what pack() makes, through a non-blocking pipe that takes the message in
    pieces, for every kind of tensor that a reply carries (a subclass, a transposed and a conjugated view, bool,
    bfloat16, complex, empty, meta)."""
    import threading

    class Odd(torch.Tensor):
        pass

    big = torch.randn(300, 257)
    message = {"big": big, "t": big.T, "sub": torch.Tensor._make_subclass(Odd, torch.randn(70_000)),
               "z": torch.randn(9000, dtype=torch.complex64).conj(), "b": torch.rand(70_000) > 0.5,
               "h": torch.randn(40_000).to(torch.bfloat16), "small": [torch.arange(3), torch.empty(0, 4)],
               "m": torch.empty(3, device="meta"), "n": 2, "s": "x",
               # more pieces than one write gathers (_IOV_MAX), empty ones among them
               "many": [torch.full((k % 3,), float(k)) for k in range(700)]}
    expected = pack(message)
    assert expected[4:].startswith(b'{"big": {"__tensor__": 0')  # what pack makes, not an empty message
    for deadline in (None, 60):
        r, w = os.pipe()
        os.set_blocking(w, deadline is None)
        chunks = []

        def drain():
            while data := os.read(r, 4096):
                chunks.append(data)

        reader = threading.Thread(target=drain)
        reader.start()
        try:
            write_message(w, message, deadline=None if deadline is None else __import__("time").monotonic() + deadline)
        finally:
            os.close(w)
            reader.join(timeout=60)
            os.close(r)
        assert b"".join(chunks) == expected
    back = _fed(expected, chunk=1 << 16)
    assert torch.equal(back["t"], big.T) and torch.equal(back["z"], message["z"].resolve_conj())
    assert [t.tolist() for t in back["many"]] == [t.tolist() for t in message["many"]]


def test_the_fast_header_is_the_plain_walks_byte_for_byte():
    """A header is written by JSON's C encoder, which calls back only for tensors and dtypes; where it stops (a
    NaN, an infinity, a key JSON cannot write) the message is walked in Python. Either way the same bytes, the
    same buffers: a tensor subclass, a view, meta, a dtype, torch.Size, an unknown object, keys of every kind."""
    import json

    from validator.worker import protocol

    class Sub(torch.Tensor):
        pass

    class Thing:
        def __repr__(self):
            return "<thing>"

    base = {"a": [1, 2.5, "x", None, True, (3, 4), torch.Size([2, 3])], "t": torch.randn(3, 4).T,
            "d": torch.float16, "s": torch.Tensor._make_subclass(Sub, torch.zeros(2)), 5: "an int key",
            "meta": torch.empty(2, device="meta"), 2.5: "a float key", "o": Thing(), "big": 10 ** 30, "z": -0.0}
    for message in [base, dict(base, nan=[float("nan")]), dict(base, keys={True: 1, None: 2, False: 3}),
                    dict(base, tuple_key={(1, 2): 3}), {"inf": float("-inf"), "x": torch.ones(2)}]:
        walked, fast = [], []
        assert protocol._header(message, fast) == json.dumps(protocol._encode(message, walked), allow_nan=False).encode()
        assert [protocol.tensor_bytes(t) for t in fast] == [protocol.tensor_bytes(t) for t in walked]
    assert roundtrip({"k": {True: torch.ones(1)}})["k"]["true"].item() == 1.0
