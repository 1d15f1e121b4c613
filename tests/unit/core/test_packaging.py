"""Issue 15 item 4: a library that installs cleanly under ``ctxledger.``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())

#: Run in a folder holding a user's own ``schemas``, ``warehouse`` and ``jobs``
#: packages that fail loudly if anything imports them.
PROBE = """
import sys
import ctxledger
from ctxledger.warehouse import Warehouse
assert ctxledger.Warehouse is Warehouse
ctxledger.Context.open
import ctxledger.schemas.policy
assert ctxledger.schemas.policy.DEFAULT_POLICY_PATH.is_file()
bare = sorted(m for m in sys.modules if m.split(".")[0] in {names!r})
assert bare == [], bare
print("ok")
"""


def test_a_users_own_schemas_folder_shadows_nothing(tmp_path):
    names = ("schemas", "warehouse", "jobs", "serving", "pipelines")
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ImportError('the user folder {name} was imported')\n"
        )
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(names=set(names))],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_dependencies_are_ranges_and_the_lock_stays_exact():
    project = PYPROJECT["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    pinned = [s for s in specs if "==" in s]
    unbounded = [s for s in specs if ">=" in s and "<" not in s]
    assert (pinned, unbounded) == ([], [])
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    exact = [line for line in lock if re.match(r"^[A-Za-z0-9]", line)]
    assert exact and all("==" in line for line in exact)


def test_python_3_11_to_3_13_and_a_typed_package():
    assert PYPROJECT["project"]["requires-python"] == ">=3.11,<3.14"
    assert PYPROJECT["project"]["scripts"]["ctxledger"] == "ctxledger.jobs.cli:main"
    assert (ROOT / "ctxledger" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["ctxledger"]
