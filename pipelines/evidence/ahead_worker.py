"""The embed-ahead helper process (``python -m
ctxledger.pipelines.evidence.ahead_worker``; see ``pipelines.evidence.ahead``).

It reads frames on stdin: ``("start", {...})`` first (the policy and the
warehouse), then ``("output", tenant, text)`` per redacted tool output,
``("lend",)`` when the evidence stage would embed a pass itself (answered
with ``("pass", keys, work)``, the keys empty when none is left),
``("flush",)`` when it wants the vectors (answered with one ``("vectors",
keys, matrix)`` frame on stdout), and ``("stop",)`` or the end of stdin.
No Beam here; MiniLM loads with the first group. Anything the libraries
print goes to stderr: stdout carries the frames only.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import numpy as np

from ctxledger.pipelines.evidence.ahead import EmbedAhead, read_frame, write_frame
from ctxledger.schemas.evidence import EMBEDDING_DIM
from ctxledger.warehouse.evidence_api import StoredVectors


def serve(frames_in, frames_out) -> None:
    """Answer one run's frames (module docstring)."""
    first = read_frame(frames_in)
    if not (isinstance(first, tuple) and first[:1] == ("start",)):
        return
    start = first[1]
    policy = start["policy"]

    from ctxledger.pipelines.evidence.documents import artifact_chunk_texts
    from ctxledger.pipelines.evidence.embed import Embedder

    settings = policy.evidence.embedding
    embedder = Embedder(settings)
    # MiniLM loads meanwhile (the first group waits for it), the outputs
    # are read and cut at once
    threading.Thread(target=embedder.load, name="load-minilm", daemon=True).start()
    helper = EmbedAhead(
        lambda work, threads: embedder.run_pass(work, threads()),
        lambda text: artifact_chunk_texts(text, policy),
        plan=embedder.plan,
        # the run waits for the vectors when it asks for the rest: its core is
        # the helper's (lanes of one thread only slow down if another process
        # takes a core meanwhile, they never spin)
        lanes=lambda: embedder.load().thread_budget,
        stored=StoredVectors(
            start["warehouse"], settings.model, start["catalog"], start["data_path"]
        ),
    )
    try:
        while True:
            message = read_frame(frames_in)
            if message is None or message[0] == "stop":
                return
            if message[0] == "output":
                helper.submit(message[1], message[2])
            elif message[0] == "lend":
                lent = helper.lend()
                write_frame(frames_out, ("pass", *(lent or ([], None))))
            elif message[0] == "flush":
                done = helper.take_all()
                keys = list(done)
                matrix = (
                    np.stack([done[k] for k in keys]).astype(np.float32)
                    if keys
                    else np.zeros((0, EMBEDDING_DIM), dtype=np.float32)
                )
                write_frame(frames_out, ("vectors", keys, matrix))
    finally:
        helper.close()


def main() -> None:
    # Ctrl-C reaches the whole process group: the run stops this helper (or
    # its stdin ends with the run), a traceback from here would only be noise
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    frames_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints of any library go to stderr
    sys.stdout = sys.stderr
    try:
        serve(sys.stdin.buffer, frames_out)
    finally:
        frames_out.close()
    # Done: the frames are out and the warehouse let go (``serve``). The
    # interpreter's own teardown (torch, DuckDB) took 0.7-0.9 s, and the run
    # waits for this process to end before it commits.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
