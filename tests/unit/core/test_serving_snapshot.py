"""Snapshot copies of a killed server are swept (``serving.snapshot``)."""

from __future__ import annotations

import os
import subprocess
import sys

from ctxledger.serving.snapshot import OWNER_FILE, WORKDIR_PREFIX, remove_orphans


def test_copies_of_a_dead_process_are_removed_live_ones_kept(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    folders = {}
    for name, pid in (("dead", dead.stdout.strip()), ("live", str(os.getpid()))):
        folder = tmp_path / f"{WORKDIR_PREFIX}{name}"
        (folder / "g1").mkdir(parents=True)
        (folder / OWNER_FILE).write_text(pid)
        folders[name] = folder
    unowned = tmp_path / f"{WORKDIR_PREFIX}unowned"
    unowned.mkdir()
    assert remove_orphans(tmp_path) == 1
    assert not folders["dead"].exists()
    assert folders["live"].exists() and unowned.exists()
