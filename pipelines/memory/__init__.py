"""Scoped memories: extraction, consent gating, expiry, supersession, erasure.

Pure modules (no Beam): ``text`` (sentences with spans), ``patterns`` (rules),
``classify`` (MiniLM prototype classifier), ``extract`` (candidates from redacted
sessions and tool results), ``llm`` (optional OpenAI-compatible extractor),
``subjects`` (who a session is about), ``consent`` and ``inputs`` (consent events
and system records from input files), ``gate`` (basis and retention), ``readmit``
(a later grant re-admits ``no_basis`` spans), ``resolve`` (bi-temporal
supersession and conflicts). ``transforms`` wraps them for Beam as
``ExtractMemories``. See docs/memory.md.
"""
