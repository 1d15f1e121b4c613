"""Embed tool-output evidence ahead, in a helper process, while the run
redacts (no Beam here).

Why: in one process the Beam stages run one after the other. Redaction, the
ledger and the memory rules are Python on one core (about half of an inline
nightly of corpora section A), and the evidence vectors came last, MiniLM on
both cores (9-11 of its ~24 s): for half of the run one core idled. The
chunk texts of a tool output depend only on its redacted text and the policy
(``documents.artifact_chunk_texts``), so they are known as soon as the
redact stage has redacted the output.

So where every stage runs in this process (``pipelines.models.shares_process``)
and the policy embeds inline, the redact stage hands each redacted tool
output to a helper process (``submit``; ``ahead_worker``), which loads MiniLM
(on the idle core, while the run starts), cuts the outputs into their chunk
texts and embeds them with one torch thread while the stages run. When the
evidence stage asks (``take``), the run borrows the passes nobody started
(``EmbedAhead.lend``) and embeds them on its own core while the helper
finishes its own, then the helper sends all its vectors back at once.
Whatever neither embedded (a text of a document, a helper that failed) the
evidence stage embeds as before. A process, not a thread: a thread's torch
calls wait for the GIL that the stages hold (measured: no gain at all, 29.8 s
against 26.5 s).

Same vectors on every run: the helper embeds the texts in fixed groups
(``FIRST_GROUP`` doubling up to ``GROUP_TEXTS``) in the order they were
submitted (the redact stage's order, fixed in one process), and a pass's
vectors depend only on its word pieces, whatever the timing and whichever
process runs it. Keys are the evidence stage's
``(tenant, content hash)``: nothing crosses tenants. A text whose vector the
warehouse holds already is not embedded (the evidence stage reuses it). The
helper only ever sees redacted text, over a pipe to its own child process,
and writes nothing anywhere.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

import numpy as np

LOG = logging.getLogger(__name__)

#: Texts of a group the helper plans into forward passes: sorted into passes
#: of one length class within a group, so not too few.
GROUP_TEXTS = 256
#: Texts of the first group (each next one twice as many, up to
#: ``GROUP_TEXTS``).
FIRST_GROUP = 32
#: Tool outputs waiting to be cut at most; beyond it ``submit`` drops them
#: (the evidence stage embeds those itself).
MAX_WAITING = 50_000
#: Chunk texts one run's helper embeds at most: it holds their vectors until
#: the evidence stage asks (200,000 x 384 floats: ~300 MB); a larger run's
#: further texts are embedded by the evidence stage as before.
MAX_TEXTS = 200_000
#: Tool outputs a run hands over before the helper process starts: a small
#: run (a test, the bundled sample, a stream's micro-batch) embeds its few
#: texts in the evidence stage rather than start a process and load MiniLM
#: a second time (~2 CPU-s).
START_AFTER = 64
#: Landing bytes from which a run starts its helper at once, when the graph
#: is built: it imports torch and loads MiniLM (~2 s) on the core the run's
#: own start-up leaves idle, so it embeds from the first outputs on.
START_BYTES = 2_000_000

Key = tuple[str, str]
#: ``(work, threads) -> vectors`` of one forward pass (``Plan``): ``threads()``,
#: asked before the pass, caps its torch threads (0: the whole budget): one
#: core less than the budget while the run's stages go on or the run embeds
#: lent passes, one thread on a lane of ``take_all``, the whole budget when
#: the run waits and the budget is one thread.
Run = Callable[[Any, Callable[[], int]], np.ndarray]
#: Texts -> the forward passes one model call makes of them: per pass, its
#: texts' positions and the work ``Run`` takes (``MiniLM.plan``: word-piece
#: ids; by default the group is one pass and the work its texts).
Plan = Callable[[list[str]], list[tuple[list[int], Any]]]
#: A tool output's redacted text -> the chunk texts the evidence stage keeps.
Cut = Callable[[str], list[str]]


def one_pass(texts: list[str]) -> list[tuple[list[int], Any]]:
    """A group as one pass whose work is its texts (``Plan``'s default)."""
    return [(list(range(len(texts))), texts)]


class Stored(Protocol):
    """The keys (of those asked) the warehouse already holds a vector for
    (``warehouse.evidence_api.StoredVectors``); ``close`` lets go of the
    warehouse."""

    def __call__(self, keys: list[Key]) -> Container[Key]: ...

    def close(self) -> None: ...


def text_key(tenant_id: str, text: str) -> Key:
    """A chunk's embedding key (``ChunkDraft.embed_key``) from its text."""
    from ctxledger.pipelines.evidence.documents import text_hash  # noqa: PLC0415

    return (tenant_id, text_hash(text))


class EmbedAhead:
    """Chunk texts of submitted tool outputs, embedded on a worker thread (the
    helper process runs one: its main thread reads the pipe meanwhile).

    ``run`` embeds one forward pass (``Run``) of those ``plan`` makes of each
    group (``Plan``); ``cut(text)`` gives a tool output's chunk texts;
    ``stored`` (optional) says which keys the warehouse holds already; ``key``
    maps (tenant, chunk text) to the evidence stage's key; ``lanes()`` gives
    the model's thread budget (passes leave one core of it to the run until
    ``take_all``).

    Work flows: submitted outputs are cut (first, so the groups fill), cut
    texts form groups in submission order (``FIRST_GROUP`` texts, doubling
    up to ``group_size``), each group's texts not stored yet are planned
    into passes, and the worker runs the passes from the front. ``lend``
    hands the last pass not started to the run (which embeds it on its own
    core: two processes on one thread each outrun one process on two
    threads, whose small matrix products scale poorly); ``take_all`` waits
    for the rest.
    """

    def __init__(
        self,
        run: Run,
        cut: Cut,
        *,
        plan: Plan = one_pass,
        stored: Stored | None = None,
        group_size: int = GROUP_TEXTS,
        key: Callable[[str, str], Key] = text_key,
        max_texts: int = MAX_TEXTS,
        lanes: Callable[[], int] = lambda: 1,
    ):
        self._run = run
        self._lanes = lanes
        self._plan = plan
        self._max_texts = max_texts
        self._cut = cut
        self._stored = stored
        self._group_size = max(1, group_size)
        self._groups = 0  # groups planned so far
        self._key = key
        self._state = threading.Condition()
        self._waiting: deque[tuple[str, str]] = deque()  # submitted outputs
        self._queued: list[tuple[Key, str]] = []  # cut, not in a group yet
        self._passes: deque[tuple[list[Key], Any]] = deque()  # planned
        self._running = 0  # passes being embedded
        self._extra: list[threading.Thread] = []  # lanes of ``take_all``
        self._cutting = False  # an output is being cut
        self._seen: set[Key] = set()
        self._done: dict[Key, np.ndarray] = {}
        self._flush = False  # the last short group too
        #: a pass's thread cap once ``take_all`` asked (1 a lane, 0 the budget)
        self._asked: int | None = None
        self._closed = False
        self.embedded = 0
        self.failed = 0
        #: texts of the passes lent to the run
        self.lent = 0
        self._thread = threading.Thread(
            target=self._work, name="ctxledger-embed-ahead", daemon=True
        )
        self._thread.start()

    def submit(self, tenant_id: str, text: str) -> None:
        """A redacted tool output whose chunk texts the evidence stage will
        want (dropped once ``MAX_WAITING`` outputs wait)."""
        with self._state:
            if self._closed or len(self._waiting) >= MAX_WAITING:
                return
            self._waiting.append((tenant_id, text))
            self._state.notify_all()

    def lend(self) -> tuple[list[Key], Any] | None:
        """The last pass nobody started, as (its keys, its work), for the run
        to embed itself; None when none is left. Every output is cut and
        every group planned first, so the groups are those of a run that
        lends nothing: a pass's vectors are the same whoever embeds it."""
        with self._state:
            self._flush = True
            self._state.notify_all()
            while not self._closed and (self._waiting or self._cutting):
                self._state.wait()
            if self._closed:
                return None
            while self._queued:
                self._plan_group()
            if not self._passes:
                return None
            keys, work = self._passes.pop()
            self.lent += len(keys)
            return keys, work

    def take_all(self) -> dict[Key, np.ndarray]:
        """Every vector, once all submitted outputs are cut and embedded; the
        helper forgets them. The run waits meanwhile, so with a thread
        budget (``lanes()``) of two or more the passes left run side by side
        on as many threads, one torch thread each (what ``MiniLM.encode``
        does in one process), else each pass with the whole budget."""
        with self._state:
            self._flush = True
            if self._asked is None:  # the first ask: lanes for what is left
                lanes = self._lanes()
                self._asked = 1 if lanes > 1 else 0
                for k in range(1, lanes):
                    lane = threading.Thread(
                        target=self._work,
                        args=(True,),
                        name=f"ctxledger-embed-ahead-{k}",
                        daemon=True,
                    )
                    self._extra.append(lane)
                    lane.start()
            self._state.notify_all()
            while not self._closed and (
                self._waiting
                or self._cutting
                or self._queued
                or self._passes
                or self._running
            ):
                self._state.wait()
            done, self._done = self._done, {}
            return done

    def close(self) -> None:
        """Stop the worker thread (after its pass) and drop what nobody took."""
        with self._state:
            self._closed = True
            self._waiting.clear()
            self._queued.clear()
            self._passes.clear()
            self._state.notify_all()
        for thread in (self._thread, *self._extra):
            thread.join(timeout=60)
        with self._state:
            self._done.clear()
        if self._stored is not None:
            self._stored.close()

    # worker thread

    def _work(self, passes_only: bool = False) -> None:
        """The worker's loop: cut, embed and plan, in that order of need. A
        lane of ``take_all`` (``passes_only``) never cuts, so the outputs are
        cut in submission order, and plans only once every output is cut, so
        the groups are those of one lane; it ends when nothing is left."""
        while True:
            with self._state:
                while not self._closed and not self._ready(passes_only):
                    self._state.wait()
                if self._closed:
                    return
                output = step = None
                if self._waiting and not passes_only:
                    output = self._waiting.popleft()
                    self._cutting = True
                elif self._passes:
                    step = self._passes.popleft()
                    self._running += 1
                elif self._queued:
                    self._plan_group()
                    self._state.notify_all()  # passes for the other lanes
                    continue
                else:
                    return  # a lane of ``take_all``: nothing more to come
            if output is not None:
                self._cut_output(*output)
            else:
                self._embed(*step)

    def _ready(self, passes_only: bool = False) -> bool:
        """Work to do: an output to cut, a pass, a full group, or (flushed)
        any group. A lane of ``take_all`` waits only while outputs are being
        cut and no pass is planned."""
        if passes_only:
            return bool(self._passes) or not (self._waiting or self._cutting)
        if self._waiting or self._passes:
            return True
        return len(self._queued) >= self._next_size() or (
            self._flush and bool(self._queued)
        )

    def _next_size(self) -> int:
        """Texts of the next group: ``FIRST_GROUP`` doubling up to the group
        size, so the first pass starts soon after the first outputs while
        later groups are large enough to sort by length (a fixed sequence:
        the same groups whatever the timing)."""
        return min(self._group_size, FIRST_GROUP << min(self._groups, 16))

    def _plan_group(self) -> None:
        """The next group of queued texts into passes (lock held: tokenizing
        a group takes milliseconds, and ``lend`` must see every pass)."""
        size = self._next_size()
        group = self._queued[:size]
        del self._queued[:size]
        self._groups += 1
        try:
            reused = self._stored([k for k, _ in group]) if self._stored else ()
            todo = [(k, text) for k, text in group if k not in reused]
            passes = self._plan([text for _, text in todo]) if todo else []
        except Exception:  # noqa: BLE001 - the evidence stage embeds them
            LOG.debug("embed ahead: a group could not be planned", exc_info=True)
            self.failed += len(group)
            return
        for positions, work in passes:
            self._passes.append(([todo[i][0] for i in positions], work))

    def _cut_output(self, tenant_id: str, text: str) -> None:
        try:
            chunks = self._cut(text)
        except Exception:  # noqa: BLE001 - the evidence stage chunks it again
            LOG.debug("embed ahead: could not cut a tool output", exc_info=True)
            chunks = []
        with self._state:
            for chunk in chunks:
                if len(self._seen) >= self._max_texts:
                    break
                key = self._key(tenant_id, chunk)
                if key not in self._seen:
                    self._seen.add(key)
                    self._queued.append((key, chunk))
            self._cutting = False
            self._state.notify_all()

    def _threads(self) -> int:
        """The next pass's thread cap (``Run``; read without the lock: a pass
        either way is correct): one core less than the budget until
        ``take_all``, then one thread per lane, or the whole budget (0)."""
        if self._asked is None:
            return max(1, self._lanes() - 1)
        return self._asked

    def _embed(self, keys: list[Key], work: Any) -> None:
        kept: dict[Key, np.ndarray] = {}
        failed = 0
        try:
            vectors = self._run(work, self._threads)
            kept = {key: vectors[i] for i, key in enumerate(keys)}
        except Exception:  # noqa: BLE001 - the evidence stage embeds them again
            LOG.debug("embed ahead: a pass failed", exc_info=True)
            failed = len(keys)
        with self._state:
            if not self._closed:
                self._done.update(kept)
            self.embedded += len(kept)
            self.failed += failed
            self._running -= 1
            self._state.notify_all()


# frames between the run and its helper process: a length, then a pickle
# (both ends are this package, over the pipes of a child process it started)

_LENGTH = struct.Struct(">Q")


def write_frame(stream: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next message, or None at the end of the stream."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        return None
    (size,) = _LENGTH.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 - our own child process


class AheadProcess:
    """The run's side of the helper process (``ahead_worker``).

    ``submit`` holds the first ``start_after`` redacted tool outputs, then
    starts the process and queues them and every later one (a writer thread
    sends them, so redaction never waits on the pipe); the first ``take``
    embeds the passes the helper lends (given the run's model), then asks
    for every other vector and waits for them; ``close`` stops the process.
    Anything going wrong with the helper (it failed to start, died, sent
    garbage), or a run too small to start it, leaves ``take`` answering
    None: the evidence stage embeds those texts itself.
    """

    def __init__(self, start: dict[str, Any], start_after: int | None = None):
        self._start = start
        self._start_after = START_AFTER if start_after is None else start_after
        #: vectors the helper sent back (0 until the first ``take``)
        self.received = 0
        #: vectors of passes the helper lent and this process embedded
        self.lent = 0
        self._held: list[tuple[str, str, str]] = []
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._vectors: dict[Key, np.ndarray] | None = None
        self._lock = threading.Lock()
        self._submitting = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._writer: threading.Thread | None = None

    @property
    def started(self) -> bool:
        return self._proc is not None

    def launch(self) -> None:
        """Start the process now (before any output is handed over)."""
        with self._submitting:
            if self._proc is None and self._vectors is None:
                self._launch()

    def submit(self, tenant_id: str, text: str) -> None:
        with self._submitting:  # worker threads of ``multi_threading`` share it
            if self._vectors is not None:
                return  # the vectors were taken: too late for this one
            message = ("output", tenant_id, text)
            if self._proc is not None:
                self._outbox.put(message)
                return
            self._held.append(message)
            if len(self._held) > self._start_after:
                self._launch()

    def _launch(self) -> None:
        try:
            self._proc = subprocess.Popen(  # noqa: S603 - this interpreter, our module
                [sys.executable, "-m", "ctxledger.pipelines.evidence.ahead_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
        except OSError:
            LOG.warning("embed ahead: the helper process did not start")
            self._vectors = {}
            return
        self._writer = threading.Thread(
            target=self._write, name="ctxledger-embed-ahead-pipe", daemon=True
        )
        self._writer.start()
        self._outbox.put(("start", self._start))
        for message in self._held:
            self._outbox.put(message)
        self._held = []

    def take(
        self, key: Key, embed_pass: Callable[[Any], np.ndarray] | None = None
    ) -> np.ndarray | None:
        """The vector of the chunk text under ``key``, or None. The first call
        collects them all: with ``embed_pass`` (the run's model, already
        loaded) the run embeds passes the helper lends it meanwhile."""
        with self._lock:
            if self._vectors is None:
                self._vectors = self._collect(embed_pass)
            return self._vectors.pop(key, None)

    def _collect(self, embed_pass) -> dict[Key, np.ndarray]:
        self._held = []
        if self._proc is None:  # never started: a small run
            return {}
        vectors: dict[Key, np.ndarray] = {}
        try:
            if embed_pass is not None:
                self._embed_lent(embed_pass, vectors)
            self._outbox.put(("flush",))
            message = self._answer("vectors")
        except Exception:  # noqa: BLE001 - the stage embeds them itself
            LOG.warning("embed ahead: the helper's answer could not be read")
            return vectors
        if message is None:
            LOG.warning("embed ahead: the helper ended without vectors")
            return vectors
        _, keys, matrix = message
        self.received = len(keys)
        vectors.update((tuple(key), matrix[i]) for i, key in enumerate(keys))
        return vectors

    def _embed_lent(self, embed_pass, vectors: dict[Key, np.ndarray]) -> None:
        """Embed passes the helper lends, the last first, until none is left
        (its own pass goes on meanwhile); a pass that fails here is left to
        the evidence stage."""
        while True:
            self._outbox.put(("lend",))
            message = self._answer("pass")
            if message is None:
                raise ValueError("embed ahead: expected a lent pass")
            _, keys, work = message
            if not keys:
                return
            try:
                rows = embed_pass(work)
            except Exception:  # noqa: BLE001 - the stage embeds these itself
                LOG.warning("embed ahead: a lent pass failed", exc_info=True)
                return
            self.lent += len(keys)
            vectors.update((tuple(key), rows[i]) for i, key in enumerate(keys))

    def _answer(self, kind: str) -> tuple | None:
        """The helper's next frame if it is a ``kind`` answer, else None (it
        ended, or answered out of step)."""
        message = read_frame(self._proc.stdout)
        if isinstance(message, tuple) and message[:1] == (kind,):
            return message
        return None

    def _write(self) -> None:
        stdin = self._proc.stdin
        while True:
            message = self._outbox.get()
            if message is None:
                break
            try:
                write_frame(stdin, message)
            except (OSError, ValueError):  # the helper is gone: drop the rest
                break
        try:
            stdin.close()
        except OSError:
            pass

    def close(self) -> None:
        """Stop the helper; wait for it a little, then kill it."""
        self._held = []
        if self._proc is None:
            return
        self._outbox.put(("stop",))
        self._outbox.put(None)
        self._writer.join(timeout=10)
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()


#: The helper of the run this process works on (one at a time).
_CURRENT: dict[str, Any] = {}
_REGISTRY = threading.Lock()


def ahead_for(run_id: str, make: Callable[[], Any]) -> Any:
    """The run's helper, made by ``make()`` on first use; a helper of an
    earlier run (a stream's previous micro-batch) is closed first."""
    with _REGISTRY:
        current = _CURRENT.get(run_id)
        if current is None:
            for old in _CURRENT.values():
                old.close()
            _CURRENT.clear()
            current = _CURRENT[run_id] = make()
        return current


def current_ahead(run_id: str) -> Any | None:
    """The run's helper if one was made."""
    with _REGISTRY:
        return _CURRENT.get(run_id)


def release_ahead(run_id: str) -> None:
    """Close the run's helper (its commit does, and the job when it ends)."""
    with _REGISTRY:
        current = _CURRENT.pop(run_id, None)
    if current is not None:
        current.close()


@contextmanager
def released(run_id: str) -> Iterator[None]:
    """Close the run's helper when the block ends (a job wraps its pipeline
    in it: the commit closes the helper, a failed run would leave it)."""
    try:
        yield
    finally:
        release_ahead(run_id)


def run_helper(config, policy) -> AheadProcess:
    """The helper process of ``config``'s run (started on first use) with the
    policy it cuts and embeds by and the warehouse it checks for vectors."""
    start = {
        "policy": policy,
        "warehouse": config.warehouse,
        "catalog": config.catalog,
        "data_path": config.data_path,
    }
    return ahead_for(config.run_id, lambda: AheadProcess(start))
