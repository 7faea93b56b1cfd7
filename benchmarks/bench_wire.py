"""What the wire between worker and grader costs for one class submission's replies.

Run: python benchmarks/bench_wire.py [--submissions 8] [--rounds 3] [--sndbuf BYTES]

A class submission's grading gets ~130 replies from its worker, ~48 MB in all: most a few hundred bytes to a
few dozen KB, about one in eight 0.5-8 MB (a speed check's outputs and gradients, a module's parameters).
:func:`replies` makes such a set, the same every run. A forked child writes them with ``write_message`` on the
worker's end of a reply channel (``protocol.channel``), as a worker does; this process reads them with a
``Reader`` that checks the sender, as the grader does. Both report their CPU seconds per submission.

The baseline, measured in the same run on the same channel: the same bytes, packed beforehand, written with
one ``os.write`` a message and read into buffers allocated beforehand (the kernel's copies and wake-ups, no
encoding or decoding). The ratio is what the protocol costs over moving the bytes. ``--sndbuf`` sets the
worker end's send buffer (0: the system's default) for both, to compare sizes.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from validator.worker.protocol import Reader, channel, pack, write_message  # noqa: E402


def replies(seed: int = 0, count: int = 128) -> list[dict]:
    """``count`` replies shaped like a class submission's: sizes from a fixed mixture, the same every run."""
    rnd = random.Random(seed)
    out = []
    for seq in range(count):
        draw = rnd.random()
        if draw < 0.13:
            nbytes = rnd.choice([500_000, 2_000_000, 2_700_000, 8_000_000])
        elif draw < 0.5:
            nbytes = rnd.choice([4_000, 30_000])
        else:
            nbytes = 256
        out.append({"ok": True, "output": torch.randn(nbytes // 4), "input_grads": [torch.randn(16)],
                    "param_grads": {"weight": torch.randn(64)}, "seconds": 0.001, "seq": seq})
    return out


def _run(messages: list[dict], *, raw: bool, sndbuf: int) -> tuple[float, float]:
    """(writer, reader) CPU seconds to move ``messages`` through a reply channel."""
    ours, theirs = channel()
    if sndbuf:
        end = socket.socket(fileno=theirs)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        end.detach()
    packed = [pack(m) for m in messages] if raw else None
    report_r, report_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the writer: never returns
        code = 1
        try:
            os.close(ours)
            os.close(report_r)
            started = time.process_time()
            for n, message in enumerate(messages):
                if packed is not None:
                    view = memoryview(packed[n])
                    while view:
                        view = view[os.write(theirs, view):]
                else:
                    write_message(theirs, message)
            os.write(report_w, repr(time.process_time() - started).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(theirs)
    os.close(report_w)
    reader = Reader(ours, sender=pid)
    started = time.process_time()
    if packed is not None:
        buffers = [bytearray(len(p)) for p in packed]
        started = time.process_time()
        for buffer in buffers:
            view = memoryview(buffer)
            while view:
                n = reader._recv([view])
                if not n:
                    raise RuntimeError("the writer closed the channel early")
                view = view[n:]
    else:
        for _ in messages:
            reader.read()
    read_cpu = time.process_time() - started
    reader.close()
    with os.fdopen(report_r, "rb") as pipe:
        text = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not text:
        raise RuntimeError(f"the writer failed (wait status {status})")
    return float(text), read_cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=8, help="submissions' worth of replies a round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of protocol and baseline, alternated")
    parser.add_argument("--sndbuf", type=int, default=0, help="the worker end's send buffer in bytes (0: default)")
    args = parser.parse_args(argv)
    if args.submissions < 1 or args.rounds < 1:
        parser.error("--submissions and --rounds must be at least 1")
    messages = replies() * args.submissions
    size = sum(len(pack(m)) for m in messages[:len(messages) // args.submissions])
    totals = {"protocol": [0.0, 0.0], "baseline": [0.0, 0.0]}
    for _ in range(args.rounds):
        for name, raw in (("protocol", False), ("baseline", True)):
            writer, reader = _run(messages, raw=raw, sndbuf=args.sndbuf)
            totals[name][0] += writer
            totals[name][1] += reader
    per = args.submissions * args.rounds
    print(f"one class submission's replies: {len(messages) // args.submissions} messages, {size / 1e6:.1f} MB; "
          f"{args.submissions} submissions x {args.rounds} rounds, send buffer "
          f"{args.sndbuf or 'default'}")
    for name, (writer, reader) in totals.items():
        print(f"  {name:9s} writer {1e3 * writer / per:7.2f} ms  reader {1e3 * reader / per:7.2f} ms  "
              f"(CPU a submission)")
    base = sum(totals["baseline"]) or 1e-9
    print(f"  protocol / baseline: {sum(totals['protocol']) / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
