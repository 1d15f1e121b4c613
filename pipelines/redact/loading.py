"""Import presidio's anonymizer and load spaCy without their heavy plug-ins.

Why: the redactor needs presidio's *anonymizer* and a slim spaCy NER pipe, but
two plug-in lookups in those packages import far more than that, seconds per
process (and per Beam worker):

* ``presidio_anonymizer.operators`` imports its optional Azure (AHDS) operator,
  which imports ``presidio_analyzer.llm_utils``, i.e. the whole of
  ``presidio_analyzer``: its NLP engines import ``transformers.pipelines`` and
  ``torch`` (5-10 s on 2 cores). We never use the Azure operator (and the
  Azure SDK is not installed), so ``import_anonymizer`` imports the anonymizer
  with that one optional import marked absent, which the operator tolerates
  (it catches the ``ImportError``).
* ``spacy.Language()`` loads *every* ``spacy_factories`` entry point of the
  environment; presidio registers one (its Hugging Face token pipe), whose
  module imports ``transformers.pipelines``. ``load_spacy`` loads a model with
  that entry point skipped for the duration of the load; the model's own
  pipes never use it.

* ``import spacy`` imports thinc, whose compatibility module imports torch
  when it is installed (1-2 s, ~250 MB), only to offer PyTorch layers. Our
  spaCy model is thinc/numpy only, so ``load_spacy`` imports spaCy (when
  neither thinc nor torch is loaded yet) with torch marked absent for the
  duration of that import; torch imports normally afterwards (MiniLM's torch
  backend), thinc just keeps its PyTorch shims off in that process. The
  block holds ``pipelines.models``' model lock, under which our only torch
  importer (the MiniLM loader) runs, so no other thread of ours can trip on it.

Neither changes what is detected or how text is replaced: the same spaCy
model and the same anonymizer engine run, only unused plug-ins stay unloaded.
A caller that imports ``presidio_analyzer`` itself (``build_analyzer``, the
policy's presidio fallback recognizers) still gets all of it.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any

#: presidio_anonymizer's optional import that drags in all of presidio_analyzer.
_AZURE_HELPER = "presidio_analyzer.llm_utils.azure_auth_helper"
#: Entry-point modules whose spaCy factories we never use (they import
#: transformers at module level).
_SKIPPED_FACTORY_PREFIXES = ("presidio_analyzer.",)
_LOCK = threading.Lock()


def import_anonymizer() -> Any:
    """``presidio_anonymizer``, imported without ``presidio_analyzer`` (see the
    module docstring). A no-op when either is already imported."""
    with _LOCK:
        if "presidio_anonymizer" in sys.modules or "presidio_analyzer" in sys.modules:
            import presidio_anonymizer  # noqa: PLC0415

            return presidio_anonymizer
        blocked = _AZURE_HELPER not in sys.modules
        if blocked:
            sys.modules[_AZURE_HELPER] = None  # type: ignore[assignment]
        try:
            import presidio_anonymizer  # noqa: PLC0415
        finally:
            if blocked and sys.modules.get(_AZURE_HELPER, 0) is None:
                del sys.modules[_AZURE_HELPER]
        return presidio_anonymizer


@contextmanager
def _without_unused_factories():
    """spaCy's entry-point factory registry minus the skipped plug-ins."""
    from spacy import util  # noqa: PLC0415

    registry = util.registry._entry_point_factories
    own = registry.__dict__.get("_get_entry_points")
    original = registry._get_entry_points

    def wanted():
        return [
            point
            for point in original()
            if not point.value.startswith(_SKIPPED_FACTORY_PREFIXES)
        ]

    registry._get_entry_points = wanted
    try:
        yield
    finally:
        if own is None:
            del registry._get_entry_points  # back to the class's method
        else:
            registry._get_entry_points = own


def import_spacy() -> Any:
    """``spacy``, imported without torch when nothing loaded thinc or torch yet
    (see the module docstring)."""
    if any(name in sys.modules for name in ("spacy", "thinc", "torch")):
        import spacy  # noqa: PLC0415

        return spacy
    from ctxledger.pipelines.models import model_lock  # noqa: PLC0415

    with model_lock():
        blocked = "torch" not in sys.modules
        if blocked:
            sys.modules["torch"] = None  # type: ignore[assignment]
        try:
            import spacy  # noqa: PLC0415
        finally:
            if blocked and "torch" in sys.modules and sys.modules["torch"] is None:
                del sys.modules["torch"]
    return spacy


def load_spacy(model_name: str) -> Any:
    """``spacy.load(model_name)`` without loading presidio's transformers
    factory or torch (see the module docstring)."""
    spacy = import_spacy()
    with _LOCK, _without_unused_factories():
        return spacy.load(model_name)
