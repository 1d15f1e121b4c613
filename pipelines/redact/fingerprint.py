"""The detector fingerprint that ``policy_version`` carries (issue 29).

Why: the policy file alone does not say how text was redacted; recognizer
code, lexicons and model packages do too. The fingerprint is a sha256 over

* the bytes of every file under ``pipelines/redact/`` (code, lexicons, data,
  the packaged default policy), by sorted relative path, ``__pycache__`` and
  compiled files left out;
* the installed versions of the distributions those files import (found by
  reading their import statements, so a new dependency of a detector counts
  without a list to keep; ``apache_beam``, the runner, is not a detector);
* the model packages the policy's ``pii`` section names (``ner_model``, and
  any other ``*model*`` setting), with their versions;
* the environment switches that turn a derived lexicon off (every
  ``off_env="..."`` the files pass to ``derived.load_derived``, as on/off).

Thresholds in code are in the source bytes; thresholds in the policy are in the
policy hash. Nothing depends on mtimes, paths outside the package, hash seeds
or the machine, and it is computed once per process (``detector_fingerprint``
is cached; a pickled ``Policy`` carries the value to Beam workers).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.metadata import PackageNotFoundError, packages_distributions, version
from pathlib import Path
from typing import Any

#: The folder whose files are the detector.
REDACT_DIR = Path(__file__).resolve().parent
#: Imported by the detector's files but not part of what it detects.
NOT_DETECTOR = frozenset({"apache_beam", "ctxledger", "__future__"})
#: Always part of the detector (imported lazily or through presidio).
BASE_DISTRIBUTIONS = ("presidio-analyzer", "presidio-anonymizer", "spacy")


def detector_files(root: Path = REDACT_DIR) -> list[Path]:
    """Every file of the detector under ``root``, by sorted relative path."""
    files = [
        p
        for p in root.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.relative_to(root).parts
        and p.suffix not in (".pyc", ".pyo")
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def files_digest(files: Sequence[Path], root: Path) -> str:
    """sha256 over (relative path, size, bytes) of ``files``."""
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        name = path.relative_to(root).as_posix().encode("utf-8")
        digest.update(b"%s\0%d\0" % (name, len(data)))
        digest.update(data)
    return digest.hexdigest()


def imported_modules(files: Iterable[Path]) -> list[str]:
    """Top-level modules the Python ``files`` import (function bodies too)."""
    names: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return sorted(names - NOT_DETECTOR)


def lexicon_switches(files: Iterable[Path]) -> dict[str, str]:
    """``{env var: "on" | "off"}`` for every lexicon switch the files name."""
    names: set[str] = set()
    for path in files:
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_bytes(), filename=str(path))):
            if (
                isinstance(node, ast.keyword)
                and node.arg == "off_env"
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                names.add(node.value.value)
    off = ("off", "0", "false")
    return {
        name: "off" if os.environ.get(name, "").lower() in off else "on"
        for name in sorted(names)
    }


def _canonical(dist: str) -> str:
    """PEP 503 name: ``presidio_analyzer`` and ``presidio-analyzer`` are one."""
    return re.sub(r"[-_.]+", "-", dist).lower()


def _version(dist: str) -> str:
    for name in (dist, dist.replace("_", "-"), dist.replace("-", "_")):
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "absent"


def distribution_versions(modules: Iterable[str], extra: Iterable[str] = ()) -> dict:
    """``{distribution: version}`` for ``modules`` (stdlib ones map to none)
    and the ``extra`` distributions."""
    owners = packages_distributions()
    dists = {_canonical(d) for d in extra}
    for module in modules:
        dists.update(_canonical(d) for d in owners.get(module, ()))
    return {d: _version(d) for d in sorted(dists)}


def model_identity(name: str) -> list[str]:
    """What detection really loads for the model ``name``: its own package, its
    vendored copy (``ner.VENDORED_MODELS``) or the fallback small model, each
    with the version of the distribution that ships it. A run without the
    vendored medium model detects differently, so it must not share a
    fingerprint with one that has it."""
    from ctxledger.pipelines.redact.ner import (  # noqa: PLC0415
        VENDORED_MODELS,
        model_location,
    )

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        location = model_location(name)
    if location == name:
        return [name, _version(name)]
    vendored = VENDORED_MODELS.get(name)
    if vendored is not None and location not in (name,) and "/" in location:
        return [name, "vendored", vendored[0], _version(vendored[0])]
    return [name, "fallback", location, _version(location)]


def fingerprint(models: str | Sequence[str], root: Path = REDACT_DIR) -> str:
    """The detector fingerprint (sha256 hex) of the files under ``root`` with
    the model packages ``models`` (the policy's ``pii`` model settings)."""
    models = [models] if isinstance(models, str) else sorted(set(models))
    files = detector_files(root)
    payload = {
        "files": files_digest(files, root),
        "packages": distribution_versions(imported_modules(files), BASE_DISTRIBUTIONS),
        "models": [model_identity(m) for m in models],
        "switches": lexicon_switches(files),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@cache
def detector_fingerprint(models: str | tuple[str, ...]) -> str:
    """``fingerprint`` of the installed detector, once per process and models."""
    return fingerprint(models)


def policy_models(pii: Any) -> tuple[str, ...]:
    """Model names a policy's ``pii`` section gives (``ner_model`` and any other
    setting whose name says ``model``), for ``detector_fingerprint``."""
    found: set[str] = set()
    for key, value in pii.model_dump(mode="json").items():
        if "model" not in key:
            continue
        values = value if isinstance(value, list) else [value]
        found.update(v for v in values if isinstance(v, str) and v)
    return tuple(sorted(found))
