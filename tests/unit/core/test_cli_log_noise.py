"""Beam's import-time ``apitools not found`` warning stays out of run logs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

if importlib.util.find_spec("apitools") is not None:
    pytest.skip(
        "apitools is installed: Beam has nothing to warn about", allow_module_level=True
    )


def test_importing_beam_under_the_cli_filter_logs_no_apitools_warning() -> None:
    # A fresh interpreter: Beam logs the warning once, at its first import.
    code = (
        "from ctxledger.jobs.cli_support import quiet_beam_import_noise\n"
        "quiet_beam_import_noise(); quiet_beam_import_noise()\n"
        "import apache_beam.io.gcp.internal.clients.bigquery  # noqa: F401\n"
        "import logging; logging.warning('other warnings still show')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "apitools" not in done.stderr
    assert "other warnings still show" in done.stderr


def test_without_the_filter_beam_does_log_it() -> None:
    """The test above can fail: Beam really logs the warning here."""
    code = "import apache_beam.io.gcp.internal.clients.bigquery  # noqa: F401\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert "apitools not found" in done.stderr
