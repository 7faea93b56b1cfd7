"""The worker process: imports the student's layers.py and executes calls for the grader.

Started as ``python -m validator.worker.main REQ_FD RESP_FD``. Its stdout and
stderr are redirected by the grader; requests and responses travel on the two
inherited pipe descriptors only, so nothing a student prints can be mistaken
for a response.
"""

from __future__ import annotations

import importlib.util
import os
import sys


def _load_student(path: str) -> tuple[dict, dict]:
    from validator.runner import exception_info

    spec = importlib.util.spec_from_file_location("student_layers", path)
    if spec is None or spec.loader is None:
        return {}, {"type": "ImportError", "mro": ["ImportError"], "message": f"cannot import {path}"}
    module = importlib.util.module_from_spec(spec)
    sys.modules["student_layers"] = module
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001 - any failure at import is reported, not raised
        info = exception_info(exc, origin=path)
        if isinstance(exc, SyntaxError):
            info["where"] = [{"file": path, "line": exc.lineno or 0, "function": "<module>",
                              "code": (exc.text or "").rstrip()}]
            info["message"] = exc.msg
        return {}, info
    return vars(module), {}


def serve(req_fd: int, resp_fd: int) -> None:
    import torch

    from validator.runner import describe_entry, exception_info, execute
    from validator.worker.protocol import ChannelClosed, Reader, write_message

    torch.set_num_threads(int(os.environ.get("VALIDATOR_WORKER_THREADS", "1")))
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
            elif op == "load":
                origin = os.path.abspath(request["path"])
                namespace, error = _load_student(origin)
                reply = {"ok": not error, "exception": error or None,
                         "names": sorted(k for k in namespace if not k.startswith("_"))}
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
        try:
            write_message(resp_fd, reply)
        except BaseException as exc:  # noqa: BLE001 - e.g. an output that cannot be encoded
            write_message(resp_fd, {"ok": False, "stage": "encode",
                                    "exception": exception_info(exc, origin)})


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
    os._exit(0)
