"""The redactor loads heavy packages only when a text needs them (issue 14:
a nightly with nothing for a model starts in seconds). Run in a fresh
interpreter: this test process may already hold any of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

_SCRIPT = """
import json, sys
from ctxledger.pipelines.redact.engine import Redactor
from ctxledger.schemas.policy import load_policy

HEAVY = ("presidio_analyzer", "presidio_anonymizer", "transformers", "torch", "spacy")

def loaded():
    return sorted(m for m in HEAVY if m in sys.modules)

redactor = Redactor(load_policy(None), b"k" * 32)
redactor.setup()
steps = {"setup": loaded()}
plain = redactor.redact_text("Build finished: 3 passed.", "t")
steps["nothing to replace"] = loaded()
phone = redactor.redact_text("call 415-555-0172 now", "t")
steps["pattern only"] = loaded()
prose = redactor.redact_text("Yesterday I met Dana Whitfield in Paris.", "t")
steps["prose"] = loaded()
import torch  # MiniLM's torch backend still imports it afterwards
steps["torch"] = loaded()
print(json.dumps({"steps": steps, "texts": [plain.text, phone.text, prose.text]}))
"""


def test_models_and_presidio_load_only_when_a_text_needs_them():
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    steps = result["steps"]
    assert steps["setup"] == [] and steps["nothing to replace"] == []
    assert steps["pattern only"] == ["presidio_anonymizer"]  # not its analyzer
    # spaCy only for prose, and none of what its plug-ins used to import:
    # presidio's analyzer, transformers, torch (through thinc).
    assert steps["prose"] == ["presidio_anonymizer", "spacy"]
    assert "torch" in steps["torch"]
    plain, phone, prose = result["texts"]
    assert plain == "Build finished: 3 passed."
    assert "415-555-0172" not in phone and "<PHONE_NUMBER:" in phone
    assert "Dana Whitfield" not in prose and "<PERSON:" in prose
