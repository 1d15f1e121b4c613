"""Landing files split between local Beam workers (``pipelines.ingest.spread``):
every file exactly once, balanced by bytes, deterministic (issue 14: the
multi-process flags waited on the worker that had drawn the big files)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.ingest.landing import LandingItem
from ctxledger.pipelines.ingest.spread import spread_files


def _item(n: int, size: int) -> LandingItem:
    return LandingItem(
        path=f"/l/f{n}.jsonl",
        rel_path=f"f{n}.jsonl",
        file_hash=f"{n:064x}",
        size_bytes=size,
        tenant_id="t",
    )


SIZES = st.lists(st.integers(0, 1_000_000), max_size=60)


@settings(max_examples=200, deadline=None)
@given(SIZES, st.integers(1, 5))
def test_every_file_once_and_no_group_over_an_even_share_plus_its_largest(
    sizes, workers
):
    items = [_item(n, size) for n, size in enumerate(sizes)]
    keyed = spread_files(items, workers)
    assert Counter(id(i) for _k, i in keyed) == Counter(id(i) for i in items)
    if workers == 1:
        assert [k for k, _i in keyed] == [i.landing_id for i in items]
        return
    loads: Counter = Counter()
    for key, item in keyed:
        loads[key] += max(item.size_bytes, 1)
    assert len(loads) <= workers
    if loads:
        even = sum(loads.values()) / workers
        largest = max(max(s, 1) for s in sizes)
        assert max(loads.values()) <= even + largest


def test_the_big_file_gets_a_worker_and_the_rest_fill_the_other():
    items = [_item(0, 900)] + [_item(n, 100) for n in range(1, 10)]
    keyed = spread_files(items, 2)
    loads: Counter = Counter()
    for key, item in keyed:
        loads[key] += item.size_bytes
    assert sorted(loads.values()) == [900, 900]


def test_the_split_does_not_depend_on_the_listing_order():
    items = [_item(n, (n * 37) % 11) for n in range(30)]
    forward = dict((i.landing_id, k) for k, i in spread_files(items, 3))
    backward = dict((i.landing_id, k) for k, i in spread_files(items[::-1], 3))
    assert forward == backward
