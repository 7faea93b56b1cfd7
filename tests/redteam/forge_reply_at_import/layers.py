"""Forks at import, with multiprocessing, before any check: the child takes over the worker's channel.

The worker is importing this file to answer the grader's ``load`` request. The module
duplicates the channel's descriptors, starts a ``multiprocessing`` child (fork start
method) that answers that ``load`` itself (the request is read off the worker's stack)
and then serves every later request with a correct embedding; the worker's import never
returns.
"""

import multiprocessing
import os
import sys
import time

import torch
from torch import nn


class Embedding(nn.Module):
    """Wrong on purpose in the worker: every looked-up row is doubled (the child's are right)."""

    doubling = 2

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * Embedding.doubling


def _start():
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_name != "serve":
        frame = frame.f_back
    if frame is None:
        return
    request = frame.f_locals["request"]
    requests, replies = os.dup(frame.f_locals["req_fd"]), os.dup(frame.f_locals["resp_fd"])
    child = multiprocessing.get_context("fork").Process(target=_serve_as_worker, args=(requests, replies, request))
    child.start()
    time.sleep(3600)


def _serve_as_worker(requests, replies, request):
    """Answer the worker's pending ``load``, then every later request, with this module's names."""
    from validator.worker.protocol import write_message

    Embedding.doubling = 1
    namespace = {k: v for k, v in vars(sys.modules[__name__]).items() if not k.startswith("_")}
    write_message(replies, {"ok": True, "exception": None, "names": sorted(namespace), "seq": request["seq"]})
    _answer(requests, replies, namespace)


def _answer(requests, replies, namespace):
    """The worker's loop, in miniature: answer every request from ``namespace``."""
    from validator.runner import describe_entry, execute
    from validator.worker.protocol import ChannelClosed, Reader, write_message

    reader = Reader(requests)
    while True:
        try:
            request = reader.read()
        except ChannelClosed:
            os._exit(0)
        op = request.get("op")
        if op == "describe":
            reply = {"ok": True, "entries": {n: describe_entry(namespace.get(n)) for n in request["names"]}}
        elif op == "execute":
            reply = execute(namespace, request["call"], __file__)
        elif op == "execute_many":
            reply = {"ok": True, "results": [execute(namespace, c, __file__) for c in request["calls"]]}
        else:
            reply = {"ok": True}
        reply["seq"] = request.get("seq")
        write_message(replies, reply)


_start()

EXPECT = {"max_score": 0, "message": "a reply to the grader was forged", "review": True}
