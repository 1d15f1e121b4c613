"""The embed-ahead helper (``pipelines.evidence.ahead``): tool outputs handed
over while the run redacts come back as the vectors of their chunk texts,
grouped the same way whatever the timing, never across tenants, never for a
text the warehouse holds; a helper that fails or never starts costs nothing
but the evidence stage's own embedding."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from ctxledger.pipelines.evidence import ahead as ahead_mod
from ctxledger.pipelines.evidence.ahead import (
    AheadProcess,
    EmbedAhead,
    read_frame,
    text_key,
    write_frame,
)
from ctxledger.pipelines.evidence.documents import (
    RunInfo,
    artifact_chunk_texts,
    build_artifact,
)
from ctxledger.schemas import Artifact
from ctxledger.schemas.policy import load_policy

POLICY = load_policy(None)


def _cut(text: str) -> list[str]:
    """Chunk texts of a fake output: its lines."""
    return [line for line in text.split("\n") if line]


class _Model:
    """Records each call (texts, thread cap) and answers a vector per text."""

    def __init__(self, delay: float = 0.0, fail_on: str | None = None):
        self.calls: list[tuple[tuple[str, ...], bool]] = []
        self.delay = delay
        self.fail_on = fail_on

    def __call__(self, texts, threads):
        self.calls.append((tuple(texts), threads()))
        if self.fail_on is not None and any(self.fail_on in t for t in texts):
            raise RuntimeError("model exploded")
        time.sleep(self.delay)
        return np.array([[float(len(t)), 1.0] for t in texts], dtype=np.float32)


def _taken(helper: EmbedAhead, outputs) -> dict:
    """Hand ``(tenant, text)`` outputs to ``helper``, take every vector, close it."""
    try:
        for tenant, text in outputs:
            helper.submit(tenant, text)
        return helper.take_all()
    finally:
        helper.close()


def _outputs(n: int) -> list[tuple[str, str]]:
    return [("t1", f"line {i} a\nline {i} b") for i in range(n)]


@pytest.mark.parametrize("pause", [0.0, 0.05])
def test_groups_follow_the_submission_order_whatever_the_timing(pause):
    model = _Model(delay=0.01)
    helper = EmbedAhead(model, _cut, group_size=4)
    try:
        for tenant, text in _outputs(5):
            helper.submit(tenant, text)
            time.sleep(pause)  # slow redaction: the helper runs ahead
        done = helper.take_all()
    finally:
        helper.close()
    texts = [t for call, _ in model.calls for t in call]
    assert texts == [f"line {i} {s}" for i in range(5) for s in "ab"]
    assert [len(call) for call, _ in model.calls] == [4, 4, 2]
    assert model.calls[-1][1] == 0  # the run waits: the whole budget
    assert done[text_key("t1", "line 3 b")].tolist() == [8.0, 1.0]
    assert len(done) == 10


def test_a_text_is_embedded_once_per_tenant_and_never_across_tenants():
    model = _Model()
    helper = EmbedAhead(model, _cut, group_size=100)
    done = _taken(helper, [("t1", "same\nother"), ("t1", "same"), ("t2", "same")])
    assert sorted(done) == sorted(
        [text_key("t1", "same"), text_key("t1", "other"), text_key("t2", "same")]
    )
    assert model.calls == [(("same", "other", "same"), 0)]


def test_texts_the_warehouse_holds_are_not_embedded():
    class Stored:
        closed = False

        def __call__(self, keys):
            return {k for k in keys if k == text_key("t1", "known")}

        def close(self):
            self.closed = True

    model, stored = _Model(), Stored()
    helper = EmbedAhead(model, _cut, stored=stored, group_size=100)
    done = _taken(helper, [("t1", "known\nnew")])
    assert model.calls == [(("new",), 0)]
    assert list(done) == [text_key("t1", "new")]
    assert stored.closed  # no read-only attach outlives the helper


def test_the_helper_stops_taking_texts_at_its_cap():
    """A huge run's vectors are not all held by the helper: past ``max_texts``
    the evidence stage embeds the rest itself."""
    model = _Model()
    helper = EmbedAhead(model, _cut, group_size=100, max_texts=3)
    done = _taken(helper, [("t1", "a\nb"), ("t1", "c\nd"), ("t1", "e")])
    assert sorted(done) == sorted(text_key("t1", t) for t in "abc")


def test_a_failed_group_or_cut_is_left_to_the_evidence_stage():
    def cut(text):
        if text == "bad output":
            raise ValueError("cannot cut")
        return _cut(text)

    model = _Model(fail_on="poison")
    helper = EmbedAhead(model, cut, group_size=2)
    texts = ["a\nb", "poison\nc", "bad output", "d"]
    done = _taken(helper, [("t1", text) for text in texts])
    assert sorted(k[1] for k in done) == sorted(
        text_key("t1", t)[1] for t in ["a", "b", "d"]
    )
    assert helper.failed == 2 and helper.embedded == 3


def test_take_all_waits_for_the_pass_in_flight():
    started, release = threading.Event(), threading.Event()

    def slow(texts, threads):
        started.set()
        release.wait(5)
        return np.ones((len(texts), 2), dtype=np.float32)

    helper = EmbedAhead(slow, _cut, group_size=1)
    try:
        helper.submit("t1", "x")
        assert started.wait(5)
        result: dict = {}
        taker = threading.Thread(target=lambda: result.update(helper.take_all()))
        taker.start()
        time.sleep(0.05)
        assert taker.is_alive()  # the group is still being embedded
        release.set()
        taker.join(5)
    finally:
        helper.close()
    assert list(result) == [text_key("t1", "x")]


def _pairs(texts):
    """A plan of passes of two texts (the work: their texts)."""
    return [
        (list(range(i, min(i + 2, len(texts)))), texts[i : i + 2])
        for i in range(0, len(texts), 2)
    ]


def test_lent_passes_are_the_last_ones_of_the_same_groups():
    """While the helper is on its first pass, the run borrows every other
    pass, the last first; the groups and passes are those of a run that
    lends nothing, so each text has the same vector whoever embeds it."""
    alone = _Model()
    _taken(EmbedAhead(alone, _cut, plan=_pairs, group_size=4), _outputs(5))
    started, release = threading.Event(), threading.Event()
    calls = []

    def run(work, threads):
        calls.append((tuple(work), threads()))
        started.set()
        release.wait(5)
        return np.array([[float(len(t)), 1.0] for t in work], dtype=np.float32)

    helper = EmbedAhead(run, _cut, plan=_pairs, group_size=4)
    try:
        for tenant, text in _outputs(5):
            helper.submit(tenant, text)
        assert started.wait(5)
        lent = []
        while (one := helper.lend()) is not None:
            lent.append(one)
        release.set()
        done = helper.take_all()
    finally:
        helper.close()
    texts = [f"line {i} {s}" for i in range(5) for s in "ab"]
    # groups of 4, 4 and 2 texts, in passes of two: the helper ran the first
    assert calls == [(tuple(texts[:2]), 1)]  # a core left to the run
    assert [tuple(work) for _keys, work in lent] == [
        tuple(texts[i : i + 2]) for i in (8, 6, 4, 2)
    ]
    assert [call for call, _ in alone.calls] == [
        tuple(texts[i : i + 2]) for i in range(0, 10, 2)
    ]
    assert lent[0][0] == [text_key("t1", t) for t in texts[8:]]
    assert sorted(done) == sorted(text_key("t1", t) for t in texts[:2])
    assert helper.lent == 8 and helper.embedded == 2


def test_take_all_runs_the_passes_left_side_by_side_on_idle_cores():
    """A run that lends nothing waits in ``take_all``: with two idle cores
    the passes left run on two lanes, one thread each, and they are the
    passes of one lane."""
    alone = _Model()
    _taken(EmbedAhead(alone, _cut, plan=_pairs, group_size=4), _outputs(5))
    calls, lane_ran = [], threading.Event()

    def run(work, threads):
        calls.append((tuple(work), threads(), threading.current_thread().name))
        if threading.current_thread().name == "ctxledger-embed-ahead":
            lane_ran.wait(5)  # the worker's pass lasts until the lane ran one
        else:
            lane_ran.set()
        return np.array([[float(len(t)), 1.0] for t in work], dtype=np.float32)

    helper = EmbedAhead(run, _cut, plan=_pairs, group_size=4, lanes=lambda: 2)
    try:
        for tenant, text in _outputs(5):
            helper.submit(tenant, text)
        done = helper.take_all()
    finally:
        helper.close()
    assert lane_ran.is_set()
    assert sorted(work for work, _, _ in calls) == sorted(
        call for call, _ in alone.calls
    )
    assert {threads for _, threads, _ in calls} == {1}
    assert len({name for _, _, name in calls}) == 2
    assert len(done) == 10


def test_lend_waits_for_the_output_being_cut():
    """An output still being cut belongs in the last group: lending before
    it is cut would split the groups differently from run to run."""
    cutting, go = threading.Event(), threading.Event()

    def cut(text):
        if text.startswith("late"):
            cutting.set()
            go.wait(5)
        return _cut(text)

    model = _Model()
    helper = EmbedAhead(model, cut, group_size=100)
    got: list = []
    try:
        helper.submit("t1", "x")
        helper.submit("t1", "late a\nlate b")
        assert cutting.wait(5)
        lender = threading.Thread(target=lambda: got.append(helper.lend()))
        lender.start()
        time.sleep(0.05)
        assert lender.is_alive()  # waits for the cut
        go.set()
        lender.join(5)
        helper.take_all()
    finally:
        helper.close()
    # one group, one pass, whoever embedded it (the helper may have started
    # it before the lender woke)
    passes = [call for call, _ in model.calls] + [tuple(g[1]) for g in got if g]
    assert passes == [("x", "late a", "late b")]


def test_first_groups_grow_to_the_group_size(monkeypatch):
    """The first pass starts after a few outputs, later groups are large;
    the sizes are fixed, not timed."""
    monkeypatch.setattr(ahead_mod, "FIRST_GROUP", 2)
    model = _Model()
    done = _taken(EmbedAhead(model, _cut, group_size=8), _outputs(13))
    assert [len(call) for call, _ in model.calls] == [2, 4, 8, 8, 4]
    assert len(done) == 26


def test_frames_round_trip_and_end_cleanly():
    stream = io.BytesIO()
    matrix = np.arange(6, dtype=np.float32).reshape(3, 2)
    write_frame(stream, ("vectors", [("t", "h")], matrix))
    write_frame(stream, ("stop",))
    stream.seek(0)
    kind, keys, got = read_frame(stream)
    assert (kind, keys) == ("vectors", [("t", "h")]) and np.array_equal(got, matrix)
    assert read_frame(stream) == ("stop",)
    assert read_frame(stream) is None  # end of stream
    truncated = io.BytesIO(stream.getvalue()[:-3])
    read_frame(truncated)
    assert read_frame(truncated) is None


ARTIFACT_TEXT = (
    "Traceback (most recent call last):\n"
    + "".join(f"  File 'app/module_{i}.py', line {i}, in handler\n" for i in range(200))
    + "ERROR: connection to the billing database failed\n"
    + "".join(f"  File 'app/module_{i}.py', line {i}, in handler\n" for i in range(200))
    + "ValueError: the order total does not match\n"
    + "password=hunter2hunter2\n"
)


def test_chunk_texts_are_those_build_artifact_keeps():
    artifact = Artifact(
        artifact_id="art_1",
        tenant_id="t1",
        media_type="text/plain",
        size_bytes=len(ARTIFACT_TEXT),
        content=ARTIFACT_TEXT,
        policy_version="p",
    )
    built = build_artifact(artifact, POLICY, RunInfo("r", "p", "j"))
    assert len(built.chunks) > 1
    assert artifact_chunk_texts(ARTIFACT_TEXT, POLICY) == [c.text for c in built.chunks]
    # what the secret screen held back is not embedded ahead either
    assert len(built.dead_letters) == 1
    assert all("hunter2" not in t for t in artifact_chunk_texts(ARTIFACT_TEXT, POLICY))


def test_a_small_run_never_starts_the_process(monkeypatch):
    def no_process(*args, **kwargs):
        raise AssertionError("a small run must not start the helper")

    monkeypatch.setattr(ahead_mod.subprocess, "Popen", no_process)
    client = AheadProcess({"policy": POLICY}, start_after=3)
    for tenant, text in _outputs(3):
        client.submit(tenant, text)
    assert not client.started
    assert client.take(text_key("t1", "line 0 a")) is None
    client.close()


@pytest.mark.parametrize("lend", [False, True])
def test_a_helper_that_dies_leaves_every_text_to_the_stage(monkeypatch, lend):
    real = ahead_mod.subprocess.Popen

    def dies(argv, **kwargs):
        return real([argv[0], "-c", "import sys; sys.stdin.read(1)"], **kwargs)

    def embed_pass(work):
        raise AssertionError("a dead helper lends nothing")

    monkeypatch.setattr(ahead_mod.subprocess, "Popen", dies)
    client = AheadProcess({"policy": POLICY}, start_after=0)
    client.submit("t1", "line a")
    assert client.started
    key = text_key("t1", "line a")
    assert client.take(key, embed_pass if lend else None) is None
    assert client.lent == client.received == 0
    client.close()


@pytest.mark.slow
@pytest.mark.parametrize("lend", [False, True])
def test_the_helper_process_embeds_what_the_evidence_stage_would(tmp_path, lend):
    """The real helper process (MiniLM on its side): vectors of the chunk
    texts of the outputs handed over, equal to the stage's own embedding,
    also when the run embeds passes the helper lends it."""
    from ctxledger.pipelines.evidence.embed import Embedder

    here = Embedder(POLICY.evidence.embedding)
    embed_pass = (lambda work: here.run_pass(work, threads=1)) if lend else None

    outputs = [
        ("t1", ARTIFACT_TEXT),
        ("t1", "Order 1234 was refunded on 2026-11-02."),
        ("t2", "Order 1234 was refunded on 2026-11-02."),
    ]
    start = {
        "policy": POLICY,
        "warehouse": str(tmp_path / "no_warehouse"),
        "catalog": None,
        "data_path": None,
    }
    client = AheadProcess(start, start_after=0)
    try:
        for tenant, text in outputs:
            client.submit(tenant, text)
        texts = {
            (tenant, t): t
            for tenant, text in outputs
            for t in artifact_chunk_texts(text, POLICY)
        }
        got = {k: client.take(text_key(*k), embed_pass) for k in texts}
    finally:
        client.close()
    assert all(v is not None for v in got.values())
    assert client.received + client.lent == len(texts)
    assert lend or client.lent == 0
    keys = list(texts)
    want = here.encode([texts[k] for k in keys])
    cosines = [float(got[k] @ want[i]) for i, k in enumerate(keys)]
    assert min(cosines) > 0.9999
