"""A child forked in forward answers the grader, with a right embedding, while the worker stays silent.

On its first call the module finds the request being served (walking up to the worker's
loop), duplicates the channel's descriptors under other numbers (so closing or replacing
fds 3 and 4 in a child would not help), forks, and the child computes the reply with a
*correct* embedding, writes it with the right sequence number, then serves every later
request the same way. The worker itself sleeps. Only the sender's pid, which the kernel
attaches to every write on the reply socket, tells the two processes apart.
"""

import os
import sys
import time

import torch
from torch import nn

_CHILD = []


class Embedding(nn.Module):
    """Wrong on purpose: every looked-up row is doubled (the forger's child drops the doubling)."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        self.num_embeddings = num_embeddings
        self.weight = nn.Parameter(torch.empty(num_embeddings, embedding_dim, device=device, dtype=dtype))
        nn.init.trunc_normal_(self.weight, mean=0.0, std=1.0, a=-3.0, b=3.0)

    def forward(self, token_ids):
        if ((token_ids < 0) | (token_ids >= self.num_embeddings)).any():
            raise IndexError("token id out of range")
        return self.weight[token_ids] * (1 if _CHILD else 2)

    def __call__(self, token_ids):
        if _CHILD:
            return super().__call__(token_ids)
        frame = sys._getframe()
        while frame is not None and frame.f_code.co_name != "serve":
            frame = frame.f_back
        if frame is None:
            return super().__call__(token_ids)
        request, namespace, origin = (frame.f_locals[k] for k in ("request", "namespace", "origin"))
        requests, replies = os.dup(frame.f_locals["req_fd"]), os.dup(frame.f_locals["resp_fd"])
        if os.fork() == 0:
            _CHILD.append(True)
            from validator.runner import execute
            from validator.worker.protocol import write_message

            reply = execute(namespace, request["call"], origin)
            reply["seq"] = request["seq"]
            write_message(replies, reply)
            _answer(requests, replies, namespace)
        time.sleep(3600)


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


EXPECT = {"max_score": 0, "message": "a reply to the grader was forged", "review": True}
