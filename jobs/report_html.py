"""Render a run report as one self-contained HTML page with inline SVG charts.

Pure functions over a small view model (``ReportPage``, ``Chart``); no warehouse
access (``jobs.report`` gathers the data). Why hand-made SVG: the page must open
anywhere, offline, with nothing fetched (a Content-Security-Policy of
``default-src 'none'`` makes the browser refuse any request), so there is no
chart library, no script, no web font and no image file: inline CSS and inline
SVG only. Every text comes from the warehouse and is escaped.

Charts are horizontal bar charts (long stage names and reason codes stay
readable), one bar per category and series, the value printed at each bar's end,
with a title, a legend when there is more than one series, axis labels and a
message instead of bars when the run has no data for that chart.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

#: Colours (colour-blind safe Tableau 10) by meaning, reused across charts.
BLUE = "#4e79a7"
GREEN = "#59a14f"
RED = "#e15759"
ORANGE = "#f28e2b"
TEAL = "#76b7b2"
PURPLE = "#b07aa1"
GREY = "#9c9c9c"
YELLOW = "#edc948"

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

WIDTH = 560
TITLE_H = 30
LEGEND_H = 22
BAR_H = 14
BAR_GAP = 2
GROUP_PAD = 12
AXIS_H = 46
RIGHT = 78
LABEL_CHARS = 30
CHAR_W = 6.6


def esc(value: object) -> str:
    """Text or attribute value, HTML-escaped (quotes included)."""
    return html.escape("" if value is None else str(value), quote=True)


@dataclass(frozen=True)
class Series:
    """One kind of bar (e.g. records ``in``), with its legend colour."""

    name: str
    colour: str


@dataclass(frozen=True)
class Chart:
    """One bar chart: ``rows`` are (category, one value per series)."""

    chart_id: str
    title: str
    series: tuple[Series, ...]
    rows: tuple[tuple[str, tuple[float, ...]], ...]
    category_label: str
    value_label: str
    empty_message: str
    note: str = ""
    decimals: int = 0
    unit: str = ""

    def __post_init__(self) -> None:
        for category, values in self.rows:
            if len(values) != len(self.series):
                raise ValueError(
                    f"{self.chart_id}: {category!r} needs one value per series"
                )

    @property
    def empty(self) -> bool:
        return not self.rows


@dataclass(frozen=True)
class RunHeader:
    """What identifies the run at the top of the page."""

    run_id: str
    job: str
    status: str
    policy_version: str
    code_version: str
    snapshot_id: int | None
    started_at: datetime | None
    finished_at: datetime | None
    runner: str
    files_seen: int = 0
    files_new: int = 0
    files_skipped: int = 0
    error: str | None = None


@dataclass(frozen=True)
class ReportPage:
    """Everything the page shows."""

    header: RunHeader
    charts: tuple[Chart, ...]
    generated_at: datetime
    data_note: str = ""
    table_rows: tuple[tuple[str, int], ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


# ----------------------------------------------------------------- numbers
def nice_ticks(maximum: float, target: int = 5, integer: bool = False) -> list[float]:
    """Tick values from 0 to a round number >= ``maximum`` (1, 2, 2.5 or 5 x 10^k
    steps), about ``target`` of them; ``[0, 1]`` when there is nothing to show.
    ``integer``: whole-number steps only (counts have no 0.5 of a record)."""
    if not math.isfinite(maximum) or maximum <= 1e-12:  # nothing visible to show
        return [0.0, 1.0]
    raw = maximum / target
    power = 10 ** math.floor(math.log10(raw))
    steps = [m * power for m in (1, 2, 2.5, 5, 10)]
    if integer:
        steps = [s for s in steps if s >= 1 and float(s).is_integer()] or [1]
    step = next((s for s in steps if s >= raw), steps[-1])
    count = max(1, math.ceil(maximum / step - 1e-9))
    if count * step < maximum:  # the tolerance above must not cut off a bar
        count += 1
    return [float(f"{i * step:.12g}") for i in range(count + 1)]


def format_value(value: float, decimals: int = 0, unit: str = "") -> str:
    """A bar's printed value: thousands separators, fixed decimals, a unit."""
    text = f"{value:,.{decimals}f}"
    return f"{text} {unit}" if unit else text


def _tick_label(value: float, decimals: int) -> str:
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.{max(decimals, 1)}f}"


def _short(label: str, limit: int = LABEL_CHARS) -> str:
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


# ----------------------------------------------------------------- charts
def _svg_open(chart: Chart, height: int) -> list[str]:
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="chart-{esc(chart.chart_id)}" '
        f'class="chart" role="img" aria-labelledby="chart-{esc(chart.chart_id)}-title" '
        f'width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}">',
        f'<title id="chart-{esc(chart.chart_id)}-title">{esc(chart.title)}</title>',
        f'<text class="title" x="0" y="18">{esc(chart.title)}</text>',
    ]


def render_empty(chart: Chart) -> str:
    """The chart's frame with its empty-state message instead of bars."""
    height = TITLE_H + 90
    parts = _svg_open(chart, height)
    parts.append(
        f'<rect class="empty-frame" x="1" y="{TITLE_H}" width="{WIDTH - 2}" '
        f'height="80" rx="6"/>'
    )
    parts.append(
        f'<text class="empty" x="{WIDTH / 2:.0f}" y="{TITLE_H + 45}" '
        f'text-anchor="middle">{esc(chart.empty_message)}</text>'
    )
    parts.append("</svg>")
    return "\n".join(parts)


def render_chart(chart: Chart) -> str:
    """One chart as inline SVG (``render_empty`` when it has no rows)."""
    if chart.empty:
        return render_empty(chart)
    n_series = len(chart.series)
    group_h = n_series * BAR_H + (n_series - 1) * BAR_GAP + GROUP_PAD
    longest = max(len(_short(c)) for c, _ in chart.rows)
    left = 30 + min(int(longest * CHAR_W) + 10, int(LABEL_CHARS * CHAR_W) + 10)
    plot_w = WIDTH - left - RIGHT
    legend = LEGEND_H if n_series > 1 else 0
    top = TITLE_H + legend + 4
    plot_h = len(chart.rows) * group_h
    height = top + plot_h + AXIS_H
    maximum = max((max(values) for _, values in chart.rows), default=0.0)
    ticks = nice_ticks(maximum, integer=chart.decimals == 0)
    scale = plot_w / ticks[-1]

    parts = _svg_open(chart, height)
    if n_series > 1:
        x = 0
        for series in chart.series:
            parts.append(
                f'<g class="legend-item"><rect x="{x}" y="{TITLE_H - 2}" width="12" '
                f'height="12" rx="2" fill="{esc(series.colour)}"/>'
                f'<text class="legend" x="{x + 16}" y="{TITLE_H + 8}">'
                f"{esc(series.name)}</text></g>"
            )
            x += 16 + int(len(series.name) * CHAR_W) + 18
    # grid and value axis
    for tick in ticks:
        tx = left + tick * scale
        parts.append(
            f'<line class="gridline" x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" '
            f'y2="{top + plot_h}"/>'
        )
        parts.append(
            f'<text class="tick" x="{tx:.1f}" y="{top + plot_h + 15}" '
            f'text-anchor="middle">{esc(_tick_label(tick, chart.decimals))}</text>'
        )
    parts.append(
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}"/>'
    )
    parts.append(
        f'<text class="axis-label" x="{left + plot_w / 2:.1f}" '
        f'y="{top + plot_h + 36}" text-anchor="middle">'
        f"{esc(chart.value_label)}</text>"
    )
    mid = top + plot_h / 2
    parts.append(
        f'<text class="axis-label" x="12" y="{mid:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 12 {mid:.1f})">{esc(chart.category_label)}</text>'
    )
    # bars
    for index, (category, values) in enumerate(chart.rows):
        y0 = top + index * group_h + GROUP_PAD / 2
        label_y = y0 + (group_h - GROUP_PAD) / 2 + 4
        parts.append(
            f'<text class="category" x="{left - 8}" y="{label_y:.1f}" '
            f'text-anchor="end"><title>{esc(category)}</title>'
            f"{esc(_short(category))}</text>"
        )
        for s_index, (series, value) in enumerate(
            zip(chart.series, values, strict=True)
        ):
            y = y0 + s_index * (BAR_H + BAR_GAP)
            width = max(value, 0.0) * scale
            shown = format_value(value, chart.decimals, chart.unit)
            parts.append(
                f'<rect class="bar" x="{left}" y="{y:.1f}" width="{width:.1f}" '
                f'height="{BAR_H}" fill="{esc(series.colour)}" '
                f'data-series="{esc(series.name)}" data-category="{esc(category)}" '
                f'data-value="{esc(value)}"><title>{esc(category)} \u00b7 '
                f"{esc(series.name)}: {esc(shown)}</title></rect>"
            )
            parts.append(
                f'<text class="value" x="{left + width + 4:.1f}" '
                f'y="{y + BAR_H - 3:.1f}">{esc(shown)}</text>'
            )
    parts.append("</svg>")
    return "\n".join(parts)


# ----------------------------------------------------------------- page
STYLE = """
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f4f5f7; color: #1f2328;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans",
  sans-serif; }
header { background: #1f2a37; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 10px; font-size: 20px; font-weight: 600; }
header h1 code { font-size: 18px; }
dl.meta { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr));
  gap: 6px 24px; margin: 0; }
dl.meta div { display: flex; gap: 8px; min-width: 0; }
dl.meta dt { color: #a9b4c2; white-space: nowrap; }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.badge { display: inline-block; padding: 0 8px; border-radius: 9px; font-size: 12px;
  font-weight: 600; text-transform: uppercase; color: #fff; background: #6b7280; }
.badge.committed { background: #2f855a; } .badge.failed { background: #c53030; }
main { padding: 20px 28px 28px; }
.notes p { margin: 0 0 8px; color: #444; }
.notes p.warning { color: #9a3412; }
.charts { display: grid; align-items: start; gap: 18px;
  grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); }
section.card { background: #fff; border: 1px solid #d8dde3; border-radius: 8px;
  padding: 14px 18px 12px; min-width: 0; }
section.card p.note { margin: 6px 0 0; color: #555; font-size: 12.5px; }
svg.chart { display: block; max-width: 100%; height: auto; }
svg .title { font-size: 15px; font-weight: 600; fill: #1f2328; }
svg .legend, svg .category, svg .tick { font-size: 12px; fill: #333; }
svg .value { font-size: 11.5px; fill: #1f2328; font-weight: 600; }
svg .axis-label { font-size: 12px; fill: #555; font-style: italic; }
svg .gridline { stroke: #e5e7eb; stroke-width: 1; }
svg .axis { stroke: #9ca3af; stroke-width: 1; }
svg .empty-frame { fill: #fafafa; stroke: #c9ced6; stroke-dasharray: 5 4; }
svg .empty { font-size: 13px; fill: #6b7280; }
table.rows { border-collapse: collapse; font-size: 13px; }
table.rows th, table.rows td { padding: 3px 14px 3px 0; text-align: left; }
table.rows td.n { text-align: right; font-variant-numeric: tabular-nums; }
header p.error { margin: 8px 0 0; color: #fecaca; }
footer { padding: 0 28px 24px; color: #6b7280; font-size: 12px; }
"""


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    return value.strftime("%Y-%m-%d %H:%M:%S %Z").strip()


def _duration(header: RunHeader) -> str:
    if header.started_at is None or header.finished_at is None:
        return "-"
    seconds = (header.finished_at - header.started_at).total_seconds()
    minutes, secs = divmod(max(seconds, 0.0), 60)
    return f"{int(minutes)}m {secs:04.1f}s" if minutes else f"{secs:.1f}s"


def render_header(header: RunHeader) -> str:
    """The run's identity: id, job, status, policy, snapshot, times, runner."""
    facts: Sequence[tuple[str, str]] = [
        ("job", header.job),
        ("policy version", header.policy_version),
        ("snapshot", "-" if header.snapshot_id is None else str(header.snapshot_id)),
        ("started", _when(header.started_at)),
        ("finished", _when(header.finished_at)),
        ("wall time", _duration(header)),
        ("runner", header.runner),
        ("code version", header.code_version),
        (
            "landing files",
            f"{header.files_seen} seen, {header.files_new} new, "
            f"{header.files_skipped} skipped",
        ),
    ]
    items = "".join(
        f'<div><dt>{esc(k)}</dt><dd class="{esc(k.replace(" ", "-"))}">'
        f"{esc(v)}</dd></div>"
        for k, v in facts
    )
    status = esc(header.status)
    error = f'<p class="error">error: {esc(header.error)}</p>' if header.error else ""
    return (
        f'<header><h1>Run <code class="run-id">{esc(header.run_id)}</code> '
        f'<span class="badge {status}">{status}</span></h1>'
        f'<dl class="meta">{items}</dl>{error}</header>'
    )


def render_card(chart: Chart) -> str:
    note = f'<p class="note">{esc(chart.note)}</p>' if chart.note else ""
    return (
        f'<section class="card" id="card-{esc(chart.chart_id)}">'
        f"{render_chart(chart)}{note}</section>"
    )


def _rows_table(rows: Sequence[tuple[str, int]]) -> str:
    if not rows:
        return ""
    body = "".join(
        f'<tr><td>{esc(name)}</td><td class="n">{count:,}</td></tr>'
        for name, count in rows
    )
    return (
        '<section class="card" id="card-table-rows"><h2 style="margin:0 0 8px;'
        "font-size:15px\">Rows the run's snapshot added, per table</h2>"
        f'<table class="rows"><thead><tr><th>table</th><th>rows</th></tr></thead>'
        f"<tbody>{body}</tbody></table></section>"
    )


def render_page(page: ReportPage) -> str:
    """The whole self-contained HTML document."""
    header = page.header
    notes = "".join(f"<p>{esc(n)}</p>" for n in [page.data_note] if n)
    notes += "".join(f'<p class="warning">{esc(w)}</p>' for w in page.warnings)
    cards = "\n".join(render_card(chart) for chart in page.charts)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        # our constant, no double quote in it: kept literal for readers of the source
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>ctxledger run {esc(header.run_id)}</title>"
        f"<style>{STYLE}</style></head>\n<body>\n"
        f"{render_header(header)}\n"
        f'<main><div class="notes">{notes}</div>\n'
        f'<div class="charts">\n{cards}\n{_rows_table(page.table_rows)}\n</div>'
        "</main>\n"
        f"<footer>ctxledger run report, generated {esc(_when(page.generated_at))}. "
        "Self-contained: no script, no external resource.</footer>\n"
        "</body></html>\n"
    )
