"""End to end: a nightly run on a tiny landing folder, ``ctxledger report`` on it,
and the page opened in headless Chromium: every chart's SVG with its bars is in
the rendered DOM, the browser was asked for nothing over the network, and a
screenshot shows the charts in their colours.

Skips only when ``/usr/bin/chromium`` is absent (CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from ctxledger.jobs.nightly import run_nightly
from ctxledger.jobs.report import gather
from ctxledger.jobs.report_html import BLUE, GREEN, ORANGE, PURPLE, RED

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHAT = (
    ROOT / "sample/landing/tenant=acme/subject=cust-0001/canonical/support-chat.jsonl"
)
POLICY = ROOT / "policies" / "default.yaml"
CHROMIUM = Path("/usr/bin/chromium")
CHARTS = ("stages", "dead-letters", "pii", "memories", "ledger", "chunks", "timings")
WINDOW = (1280, 2300)

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="/usr/bin/chromium is not installed (apt-get install -y chromium)",
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One nightly run over one small transcript (dead letters, PII, a tool
    output, memories under consent), then the CLI's report of it."""
    base = tmp_path_factory.mktemp("report-e2e")
    landing = base / "landing" / "tenant=acme" / "subject=dana"
    landing.mkdir(parents=True)
    shutil.copy(CHAT, landing / CHAT.name)
    consent = base / "consent.jsonl"
    consent.write_text(
        "".join(
            json.dumps(
                {"event": "grant", "tenant_id": "acme", "subject_id": "dana",
                 "purpose": purpose, "basis": "contract",
                 "at": "2026-01-01T00:00:00Z"}
            ) + "\n"
            for purpose in ("support", "billing")
        )
    )  # fmt: skip
    # long retention: the 2026-03 transcript must not expire with today's date
    data = yaml.safe_load(POLICY.read_text())
    data["memory"]["retention"] = {
        source: {"*": 3650}
        for source in ("user_stated", "system_record", "model_inferred")
    }
    policy = base / "policy.yaml"
    policy.write_text(yaml.safe_dump(data))
    warehouse = base / "wh"
    result = run_nightly(
        base / "landing", warehouse, policy_file=policy, consent=consent
    )
    assert result.manifest is not None and result.manifest.status == "committed"
    html = base / "out" / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "ctxledger.jobs.cli", "report", "--run", "latest",
         "--html", str(html), "--warehouse", str(warehouse)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert result.run_id in done.stdout
    return base, html, gather(warehouse, result.run_id), result


def _chromium(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / f"profile-{len(list(tmp.glob('profile-*')))}"
    return subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
         # belt and braces: even a request that slipped through resolves nowhere
         "--host-resolver-rules=MAP * ~NOTFOUND", *args],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


#: What Chromium logs when a page asks for a resource: CSP refusals and
#: failed loads (the page's own console messages are logged as CONSOLE).
BLOCKED = re.compile(r"Content Security Policy|net::ERR_|Failed to load resource")


class _Marks(HTMLParser):
    """Bars per chart SVG in a DOM dump, plus the page's CSP."""

    def __init__(self):
        super().__init__()
        self.chart: str | None = None
        self.bars: Counter[str] = Counter()
        self.charts: list[str] = []
        self.csp: str | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy":
            self.csp = attrs.get("content")
        if tag == "svg" and (attrs.get("id") or "").startswith("chart-"):
            self.chart = attrs["id"].removeprefix("chart-")
            self.charts.append(self.chart)
        if tag == "rect" and self.chart and "bar" in (attrs.get("class") or ""):
            self.bars[self.chart] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.chart = None


@needs_chromium
def test_every_chart_with_its_bars_is_in_the_rendered_dom(report, tmp_path):
    _, html, page, result = report
    done = _chromium(tmp_path, "--dump-dom", html.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    marks = _Marks()
    marks.feed(done.stdout)
    assert marks.charts == list(CHARTS)
    assert marks.csp and "default-src 'none'" in marks.csp
    for chart in page.charts:
        # this run has data for every chart: one bar per category and series
        assert not chart.empty, chart.chart_id
        expected = len(chart.rows) * len(chart.series)
        assert marks.bars[chart.chart_id] == expected, chart.chart_id
    assert result.run_id in done.stdout and "committed" in done.stdout
    timings = {
        c: v for c, (v,) in next(c for c in page.charts if c.chart_id == "timings").rows
    }
    assert {"ingest", "redact", "commit"} <= set(timings)
    assert [m for m in done.stderr.splitlines() if BLOCKED.search(m)] == []


@needs_chromium
def test_the_network_check_would_catch_a_page_that_fetches(report, tmp_path):
    _, html, _, _ = report
    leaky = tmp_path / "leaky.html"
    leaky.write_text(
        html.read_text().replace(
            "<body>", '<body><img src="https://cdn.example.com/chart.png">', 1
        )
    )
    done = _chromium(tmp_path, "--dump-dom", leaky.as_uri())
    assert [m for m in done.stderr.splitlines() if BLOCKED.search(m)]


@needs_chromium
def test_screenshot_shows_the_charts(report, tmp_path):
    from PIL import Image

    base, html, _, _ = report
    shot = base / "report.png"
    done = _chromium(
        tmp_path, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}",
        html.as_uri(),
    )  # fmt: skip
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    assert shot.stat().st_size > 60_000  # a blank page compresses to a few KB
    with Image.open(shot) as image:
        assert image.size == WINDOW
        colours = Counter(image.convert("RGB").getdata())
    for colour in (BLUE, GREEN, RED, ORANGE, PURPLE):  # bars of every chart kind
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))
        assert colours[rgb] > 200, colour
