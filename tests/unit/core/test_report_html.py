"""The run report's HTML and SVG rendering: pure functions, no warehouse."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxledger.jobs.report_html import (
    CSP,
    Chart,
    ReportPage,
    RunHeader,
    Series,
    format_value,
    nice_ticks,
    render_chart,
    render_page,
)

SVG = "{http://www.w3.org/2000/svg}"
EVIL = "<script>alert('x')</script>&\"quoted\""


def _chart(rows, series=(Series("in", "#111111"), Series("dead", "#222222")), **kw):
    fields = {
        "chart_id": "stages",
        "title": "Records per stage",
        "series": series,
        "rows": rows,
        "category_label": "stage",
        "value_label": "records",
        "empty_message": "No stage counts.",
    }
    fields.update(kw)
    return Chart(**fields)


def _svg(markup: str) -> ET.Element:
    """Parse one rendered chart: it must be well-formed XML on its own."""
    return ET.fromstring(markup)


def _bars(root: ET.Element) -> list[ET.Element]:
    return [r for r in root.iter(f"{SVG}rect") if r.get("class") == "bar"]


def _shown(text: ET.Element) -> str:
    """What a <text> displays: its own text, not a <title> tooltip inside it."""
    return ((text.text or "") + "".join(c.tail or "" for c in text)).strip()


def _texts(root: ET.Element, cls: str) -> list[str]:
    return [_shown(t) for t in root.iter(f"{SVG}text") if t.get("class") == cls]


@given(st.floats(min_value=0, max_value=1e9, allow_nan=False), st.booleans())
def test_ticks_start_at_zero_rise_and_cover_the_maximum(maximum, integer):
    ticks = nice_ticks(maximum, integer=integer)
    assert ticks[0] == 0
    assert all(b > a for a, b in zip(ticks, ticks[1:], strict=False))
    assert ticks[-1] >= maximum * (1 - 1e-9)  # tick labels are rounded to 12 digits
    assert 2 <= len(ticks) <= 7 or (integer and maximum < 7)
    if integer:
        assert all(float(t).is_integer() for t in ticks)


def test_ticks_are_round_numbers():
    assert nice_ticks(9) == [0, 2, 4, 6, 8, 10]
    assert nice_ticks(42.5) == [0, 10, 20, 30, 40, 50]
    assert nice_ticks(0.3) == [0, 0.1, 0.2, 0.3]
    assert nice_ticks(0) == [0, 1]
    assert nice_ticks(1, integer=True) == [0, 1]
    assert nice_ticks(3, integer=True) == [0, 1, 2, 3]


def test_values_are_printed_with_separators_decimals_and_unit():
    assert format_value(1234567) == "1,234,567"
    assert format_value(1.5, 2, "s") == "1.50 s"


def test_one_bar_per_category_and_series_with_its_value_printed():
    chart = _chart((("ingest", (12, 0)), ("redact", (10, 2))))
    root = _svg(render_chart(chart))
    bars = _bars(root)
    assert [(b.get("data-category"), b.get("data-series")) for b in bars] == [
        ("ingest", "in"),
        ("ingest", "dead"),
        ("redact", "in"),
        ("redact", "dead"),
    ]
    assert _texts(root, "value") == ["12", "0", "10", "2"]
    widths = [float(b.get("width")) for b in bars]
    assert widths[1] == 0 and widths[0] > widths[2] > widths[3] > 0
    assert _texts(root, "title") == ["Records per stage"]
    assert _texts(root, "axis-label") == ["records", "stage"]
    assert _texts(root, "legend") == ["in", "dead"]
    assert _texts(root, "category") == ["ingest", "redact"]


def test_a_single_series_chart_has_no_legend_and_bars_scale_to_the_axis():
    chart = _chart(
        (("redact", (3.0,)), ("commit", (0.25,))),
        series=(Series("seconds", "#333333"),),
        decimals=2,
        unit="s",
    )
    root = _svg(render_chart(chart))
    assert _texts(root, "legend") == []
    assert _texts(root, "value") == ["3.00 s", "0.25 s"]
    ticks = _texts(root, "tick")
    assert ticks[0] == "0" and float(ticks[-1]) >= 3


def test_an_empty_chart_shows_its_message_and_no_bars():
    root = _svg(render_chart(_chart(())))
    assert _bars(root) == []
    assert _texts(root, "empty") == ["No stage counts."]
    assert root.get("id") == "chart-stages"


def test_long_category_labels_are_shortened_with_the_full_one_in_a_tooltip():
    label = "file_changed_during_run_and_then_some_more (ingest)"
    root = _svg(render_chart(_chart(((label, (1, 1)),))))
    (text,) = [t for t in root.iter(f"{SVG}text") if t.get("class") == "category"]
    assert text.find(f"{SVG}title").text == label
    shown = _shown(text)
    assert shown.endswith("\u2026") and len(shown) == 30
    assert label.startswith(shown[:-1])


def test_rows_must_have_one_value_per_series():
    with pytest.raises(ValueError, match="one value per series"):
        _chart((("ingest", (1,)),))


def test_every_warehouse_text_is_escaped_in_charts():
    chart = _chart(
        ((EVIL, (1, 2)),),
        series=(Series(EVIL, "#111111"), Series("b", '"><x y="')),
        title=EVIL,
        category_label=EVIL,
        value_label=EVIL,
    )
    markup = render_chart(chart)
    assert "<script" not in markup and '"><x' not in markup
    root = _svg(markup)  # still well-formed: nothing broke out of an attribute
    assert _bars(root)[0].get("data-category") == EVIL
    assert _texts(root, "title") == [EVIL]
    empty = render_chart(_chart((), empty_message=EVIL))
    assert "<script" not in empty and _texts(_svg(empty), "empty") == [EVIL]


def _page(charts, **header) -> str:
    fields = {
        "run_id": "run_abc",
        "job": "nightly",
        "status": "committed",
        "policy_version": "pol_1",
        "code_version": "0.1.0",
        "snapshot_id": 7,
        "started_at": datetime(2026, 3, 1, 9, 0, tzinfo=UTC),
        "finished_at": datetime(2026, 3, 1, 9, 1, 5, tzinfo=UTC),
        "runner": "DirectRunner",
    }
    fields.update(header)
    return render_page(
        ReportPage(
            header=RunHeader(**fields),
            charts=tuple(charts),
            generated_at=datetime(2026, 3, 2, tzinfo=UTC),
            data_note="Data as of snapshot 7.",
            table_rows=(("messages", 12), ("runs", 1)),
        )
    )


def test_the_page_has_the_run_header_every_chart_and_nothing_external():
    charts = [
        _chart((("ingest", (1, 0)),)),
        _chart((), chart_id="timings", empty_message="Time per stage not recorded."),
    ]
    page = _page(charts)
    assert f'content="{CSP}"' in page
    for text in ("run_abc", "nightly", "committed", "pol_1", "DirectRunner",
                 "2026-03-01 09:00:00 UTC", "2026-03-01 09:01:05 UTC", "1m 05.0s",
                 "Time per stage not recorded.", "Data as of snapshot 7."):  # fmt: skip
        assert text in page, text
    assert re.search(r'<dd class="snapshot">7</dd>', page)
    assert page.count("<svg") == 2
    assert 'id="chart-stages"' in page and 'id="chart-timings"' in page
    # no resource a browser could fetch: no script, src, href, url() or @import
    lowered = page.lower()
    for needle in ("<script", " src=", " href=", "url(", "@import", "<link", "<img"):
        assert needle not in lowered, needle
    assert re.findall(r"https?://[^\"' ]+", page) == ["http://www.w3.org/2000/svg"] * 2


def test_header_values_are_escaped_and_a_failed_run_shows_its_error():
    page = _page([], run_id=EVIL, status="failed", error=EVIL, snapshot_id=None,
                 finished_at=None)  # fmt: skip
    assert "<script" not in page
    assert "&lt;script&gt;" in page
    assert 'class="badge failed"' in page
    assert '<dd class="snapshot">-</dd>' in page
