"""Fixed windows and micro-batch cutting of the stream job (pure functions)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.pipelines.ingest.landing import LandingItem
from ctxledger.pipelines.stream.windows import (
    Picked,
    assign_windows,
    take_due,
    to_micros,
    unique_by_hash,
    window_start,
)

S = 1_000_000  # one second in microseconds


def item(name: str, digest: str | None = None) -> LandingItem:
    return LandingItem(
        path=f"/landing/{name}",
        rel_path=name,
        file_hash=digest or f"h-{name}",
        size_bytes=10,
        tenant_id="default",
    )


@pytest.mark.parametrize(
    ("t", "size", "start"),
    [
        (0, 10, 0),
        (9, 10, 0),
        (10, 10, 10),
        (25, 10, 20),
        (1_700_000_003, 5, 1_700_000_000),
    ],
)
def test_window_start_is_beam_fixed_windows(t, size, start):
    assert window_start(t * S, size * S) == start * S


def test_window_size_must_be_positive():
    with pytest.raises(ValueError):
        window_start(5, 0)


def test_to_micros_rounds_instead_of_truncating():
    assert to_micros(1.000001) == 1_000_001
    assert to_micros(0.1 + 0.2) == 300_000


def test_nothing_is_due_before_the_window_ends():
    pending = [Picked(item("a"), 12 * S), Picked(item("b"), 14 * S)]
    batch, rest = take_due(pending, now_us=19 * S, size_us=10 * S)
    assert batch is None
    assert rest == pending


def test_a_closed_window_becomes_one_batch_and_later_windows_wait():
    pending = [
        Picked(item("b"), 14 * S),
        Picked(item("a"), 12 * S),
        Picked(item("c"), 21 * S),
    ]
    batch, rest = take_due(pending, now_us=20 * S, size_us=10 * S)
    assert batch is not None
    assert [i.rel_path for i in batch.items] == ["a", "b"]  # pick-up order
    assert (batch.window_start_us, batch.window_end_us, batch.windows) == (
        10 * S,
        20 * S,
        1,
    )
    assert [p.item.rel_path for p in rest] == ["c"]


def test_a_job_that_fell_behind_catches_up_in_one_batch():
    pending = [Picked(item(n), t * S) for n, t in [("a", 1), ("b", 11), ("c", 35)]]
    batch, rest = take_due(pending, now_us=40 * S, size_us=10 * S)
    assert batch.windows == 4 - 1  # windows 0, 10 and 30 (20 was empty)
    assert (batch.window_start_us, batch.window_end_us) == (0, 40 * S)
    assert [i.rel_path for i in batch.items] == ["a", "b", "c"]
    assert rest == []


def test_drain_takes_open_windows_too():
    pending = [Picked(item("a"), 12 * S), Picked(item("b"), 14 * S)]
    batch, rest = take_due(pending, now_us=13 * S, size_us=10 * S, drain=True)
    assert [i.rel_path for i in batch.items] == ["a", "b"]
    assert rest == []


def test_drain_of_nothing_is_no_batch():
    assert take_due([], now_us=0, size_us=S, drain=True) == (None, [])


def test_same_bytes_under_two_names_are_committed_once():
    a, b = item("a.jsonl", "same"), item("copy/a.jsonl", "same")
    assert unique_by_hash([a, b]) == [a]
    batch, _ = take_due([Picked(a, 1), Picked(b, 2)], now_us=10 * S, size_us=S)
    assert batch.items == (a,)
    assert batch.file_hashes == ["same"]


times = st.lists(st.tuples(st.integers(0, 10_000 * S), st.integers(0, 50)), max_size=40)


@given(times, st.integers(1, 120), st.integers(0, 12_000), st.booleans())
def test_every_item_is_either_in_the_batch_or_still_pending(raw, size_s, now_s, drain):
    pending = [Picked(item(f"f{i}", f"h{k}"), t) for i, (t, k) in enumerate(raw)]
    batch, rest = take_due(pending, now_s * S, size_s * S, drain=drain)
    taken = [p for p in pending if p not in rest]
    # Nothing lost, nothing invented: the batch holds exactly the taken items'
    # distinct hashes, and nothing left behind belongs to a due window.
    assert len(taken) + len(rest) == len(pending)
    if batch is None:
        assert taken == []
    else:
        assert sorted(batch.file_hashes) == sorted({p.item.file_hash for p in taken})
        assert batch.window_end_us <= now_s * S or drain
    if drain:
        assert rest == []
    for p in rest:
        assert window_start(p.picked_at_us, size_s * S) + size_s * S > now_s * S


@given(times, st.integers(1, 120))
def test_assign_windows_partitions_by_window_start(raw, size_s):
    pending = [Picked(item(f"f{i}"), t) for i, (t, _k) in enumerate(raw)]
    grouped = assign_windows(pending, size_s * S)
    assert sum(len(v) for v in grouped.values()) == len(pending)
    for start, items in grouped.items():
        assert start % (size_s * S) == 0
        for it in items:
            (p,) = [p for p in pending if p.item == it]
            assert start <= p.picked_at_us < start + size_s * S
