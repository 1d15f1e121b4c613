"""The pipeline processes' garbage-collector settings (``pipelines.runtime``):
full collections ten times rarer, the heap frozen at exit, once per process,
applied by every timed step's ``setup``."""

from __future__ import annotations

import gc
import subprocess
import sys
from types import SimpleNamespace

import ctxledger.pipelines.runtime as runtime
from ctxledger.pipelines.timing import timed


def test_tune_collector_once_per_process(monkeypatch):
    saved = gc.get_threshold()
    registered = []
    monkeypatch.setattr(runtime, "_tuned", False)
    monkeypatch.setattr(runtime.atexit, "register", registered.append)
    try:
        assert runtime.tune_collector() is True
        young, middle, full = gc.get_threshold()
        assert (young, middle) == saved[:2] and full == runtime.FULL_EVERY
        assert registered == [gc.freeze]
        assert runtime.tune_collector() is False
        assert registered == [gc.freeze]
    finally:
        gc.set_threshold(*saved)


def test_a_timed_step_tunes_its_process_before_its_own_setup(monkeypatch):
    calls = []
    monkeypatch.setattr(
        "ctxledger.pipelines.timing.tune_collector", lambda: calls.append("tune")
    )

    @timed("ledger")
    class _Fn:
        def __init__(self):
            self.config = SimpleNamespace(staging_dir=None)

        def setup(self):
            calls.append("setup")

        def process(self, element):
            yield element

    _Fn().setup()
    assert calls == ["tune", "setup"]


def test_a_process_exits_cleanly_with_the_heap_frozen(tmp_path):
    """atexit handlers still run and open files are still flushed at exit."""
    buffered, late = tmp_path / "buffered.txt", tmp_path / "atexit.txt"
    code = (
        "import atexit\n"
        "from ctxledger.pipelines.runtime import tune_collector\n"
        "tune_collector()\n"
        "data = [[i] for i in range(100000)]\n"
        f"handle = open({str(buffered)!r}, 'w')\n"
        "handle.write('never flushed by hand')\n"
        f"atexit.register(lambda: open({str(late)!r}, 'w').write('ran'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False)
    assert done.returncode == 0
    assert buffered.read_text() == "never flushed by hand"
    assert late.read_text() == "ran"
