"""Column comments for analysts where a record model's field has no description.

``warehouse.views`` writes a column's comment from its pydantic ``Field``
description; these fill in the rest, so every column of every table explains
itself in ``duckdb_columns()`` (issue 32: 183 of 342 columns had none). A
``Field`` description, where one is written, wins. ``COMMON`` covers column
names that mean the same in every table; ``BY_TABLE`` the rest.
``tests/unit/core/test_views.py`` fails on a column with neither.
"""

from __future__ import annotations

#: Column name -> comment, for names with one meaning in every table.
COMMON: dict[str, str] = {
    "tenant_id": "Tenant the row belongs to; every read filters by it.",
    "subject_id": "Subject (end user) the row is about, within its tenant.",
    "session_id": "Deterministic id of the session (hash of tenant and source "
    "session id).",
    "message_id": "Deterministic id of the message (session and turn).",
    "run_id": "Run (nightly, backfill, stream batch, forget) that wrote the row; "
    "joins runs.run_id.",
    "policy_version": "Policy version (name+hash) the row was produced under.",
    "file_hash": "sha256 of the file's bytes: its identity across runs and renames.",
    "path": "Path of the file when it was read (erased:<sha256> after an erasure).",
    "size_bytes": "Size of the file in bytes.",
    "records_in": "Records read from the file.",
    "records_out": "Records of the file that went on to the next stage.",
    "dead": "Records of the file that became dead letters.",
    "source_id": "Source registry id that values the row (authority, freshness); "
    "see the sources table.",
    "content_hash": "sha256 of the (redacted) content: equal content, equal hash.",
    "extractor_version": "Version of the memory extractor that produced the row.",
    "token_count": "Tokens of the text (tiktoken cl100k_base).",
}

#: (table, column) -> comment, for everything else.
BY_TABLE: dict[tuple[str, str], str] = {
    # landing_files
    ("landing_files", "source_format"): "Reader that parsed the file (canonical, "
    "openai_chat, ...); NULL when none could.",
    ("landing_files", "status"): "processed; changed (same path, new content); "
    "unreadable (a file-level dead letter).",
    ("landing_files", "messages_parsed"): "Messages parsed from the file's "
    "accepted records (the validate and redact stages' input).",
    # artifact_trail
    ("artifact_trail", "trail_id"): "Deterministic id of the trail entry.",
    ("artifact_trail", "turn"): "Turn of the tool call in its session.",
    ("artifact_trail", "tool_call_id"): "Id of the tool call as the transcript "
    "gave it.",
    ("artifact_trail", "tool_name"): "Name of the tool that was called.",
    ("artifact_trail", "operation"): "What the call did to the resource: read, "
    "write, create, delete or test.",
    ("artifact_trail", "resource"): "File path, api:<tool> plus identifying "
    "arguments, or the test command.",
    ("artifact_trail", "content_hash"): "sha256:<hex> of content the call wrote "
    "in full (creates, whole-file writes).",
    ("artifact_trail", "outcome"): "ok, error, unknown; passed or failed for "
    "test runs.",
    ("artifact_trail", "result_turn"): "Turn of the tool result that answered "
    "the call, if any.",
    ("artifact_trail", "artifact_ref"): "Id of the stored raw tool output "
    "(artifacts table), if kept.",
    ("artifact_trail", "detail"): "Short redacted detail of the operation.",
    ("artifact_trail", "source"): "tool_call, or text_action (an action the "
    "assistant's text stated).",
    # memory_rejections
    ("memory_rejections", "rejection_id"): "Deterministic id of the rejection.",
    ("memory_rejections", "memory_id"): "Id the memory would have had if stored.",
    ("memory_rejections", "purpose"): "Purpose the candidate was classified into.",
    ("memory_rejections", "kind"): "Kind of memory (rule, preference, identity, "
    "fact, account_state, ...).",
    ("memory_rejections", "source"): "Who stated it: user_stated, system_record, "
    "model_inferred or unknown.",
    ("memory_rejections", "reason"): "Why it was not stored (no_basis, "
    "no_retention_rule, low_confidence, ...).",
    ("memory_rejections", "extractor"): "Extractor that proposed the candidate.",
    ("memory_rejections", "provenance"): "Session, message and char span the "
    "candidate came from (no text).",
    ("memory_rejections", "recorded_at"): "When the candidate's statement was "
    "made (from the data).",
    ("memory_rejections", "confidence"): "Extractor's confidence, when it gives one.",
    ("memory_rejections", "valid_from"): "When the statement would have become valid.",
    ("memory_rejections", "readmission"): "For no_basis: pending until consent "
    "arrives, readmitted, or closed.",
    ("memory_rejections", "readmission_reason"): "Why the readmission state changed.",
    ("memory_rejections", "readmitted_at"): "When a later consent grant "
    "readmitted the statement.",
    ("memory_rejections", "readmission_run_id"): "Run that readmitted it.",
    # consent
    ("consent", "consent_id"): "Deterministic id of the consent event.",
    ("consent", "purpose"): "Purpose the event grants or withdraws.",
    ("consent", "basis"): "Legal basis (consent, contract, legal_obligation, ...).",
    ("consent", "event"): "grant or withdraw.",
    ("consent", "effective_at"): "When the event takes effect.",
    ("consent", "expires_at"): "When a grant lapses by itself, if it does.",
    ("consent", "source_ref"): "Input file and line the event came from.",
    ("consent", "source"): "Who stated the event (user_stated, system_record, "
    "...), when known.",
    # memory_extractions
    ("memory_extractions", "extraction_id"): "Deterministic id (run and session).",
    ("memory_extractions", "messages_in"): "Redacted messages of the session the "
    "extraction received.",
    ("memory_extractions", "messages_scanned"): "Messages the extractors scanned.",
    ("memory_extractions", "candidates"): "Memory candidates the extractors "
    "proposed (stored or rejected).",
    # memory_inputs
    ("memory_inputs", "kind"): "consent or system_records.",
    ("memory_inputs", "status"): "processed, changed or unreadable.",
    # erasures
    ("erasures", "erasure_id"): "Deterministic id of the erasure receipt.",
    ("erasures", "subject_hash"): "Keyed hash of the erased subject (the id "
    "itself is not kept).",
    ("erasures", "reason"): "request (forget), consent_withdrawn or retention.",
    ("erasures", "requested_at"): "When the erasure was asked for.",
    ("erasures", "completed_at"): "When it finished (history included).",
    ("erasures", "rows"): "Rows removed per table.",
    ("erasures", "rows_total"): "Rows removed in all tables.",
    ("erasures", "sessions"): "Sessions of the subject that were removed.",
    ("erasures", "snapshots_expired"): "Snapshot ids expired so no history keeps "
    "the data.",
    ("erasures", "files_deleted"): "Data files deleted with the expired snapshots.",
    ("erasures", "quarantine_files_deleted"): "Quarantined raw-byte files deleted.",
    ("erasures", "catalog_compacted"): "Whether the catalog was compacted after.",
    ("erasures", "history_purged"): "Whether old snapshots were expired and their "
    "files removed.",
    ("erasures", "pseudonym_mappings"): "Pseudonym mappings removed (0: "
    "pseudonyms are keyed hashes, no mapping table exists).",
    ("erasures", "note"): "Anything the operator should know about this erasure.",
    ("erasures", "job_version"): "Code version of the job that erased.",
    # document_files
    ("document_files", "status"): "processed or unreadable.",
    ("document_files", "versions_out"): "Document versions the file produced.",
    # documents
    ("documents", "doc_version_id"): "Deterministic id of this version "
    "(doc_id and version).",
    ("documents", "doc_id"): "Id of the document across its versions (a tool "
    "artifact: its artifact id).",
    ("documents", "kind"): "document, or tool_artifact (a tool output kept as "
    "evidence).",
    ("documents", "subject_id"): "For a tool artifact: the subject whose session "
    "produced it; NULL for documents.",
    ("documents", "version"): "Version label (from metadata, file name or path).",
    ("documents", "version_sort"): "Sortable form of the version (orders versions "
    "of one document).",
    ("documents", "effective_from"): "When this version takes effect (from the "
    "data; the previous one closes then).",
    ("documents", "deleted"): "A tombstone: the document was removed as of "
    "effective_from.",
    ("documents", "title"): "Title from metadata or the first heading.",
    ("documents", "acl"): "Principal groups that may read it ('*': every group).",
    ("documents", "trust"): "trusted or untrusted (untrusted text is served "
    "wrapped as data).",
    ("documents", "authority"): "Authority from metadata (0-1); NULL: the "
    "source's or the policy's default.",
    ("documents", "source_path"): "Path of the file the version came from.",
    ("documents", "source_hash"): "sha256 of the source file's bytes.",
    ("documents", "text"): "Redacted text of the version.",
    ("documents", "text_hash"): "sha256 of the redacted text.",
    ("documents", "char_count"): "Characters of the redacted text.",
    ("documents", "chunk_count"): "Evidence chunks cut from this version.",
    ("documents", "pii"): "Redacted PII spans (type, offsets, operator; never "
    "the value).",
    ("documents", "metadata_source"): "Where the metadata came from (sidecar, "
    "front_matter, manifest, file_name, fallback).",
    ("documents", "chunker_version"): "Version of the chunker settings that cut "
    "the chunks.",
    # evidence_chunks
    ("evidence_chunks", "chunk_id"): "Deterministic id of the chunk.",
    ("evidence_chunks", "doc_version_id"): "Document version the chunk was cut "
    "from (documents.doc_version_id).",
    ("evidence_chunks", "doc_id"): "Document the chunk belongs to.",
    ("evidence_chunks", "doc_version"): "Version label of that document version.",
    ("evidence_chunks", "kind"): "document or tool_artifact.",
    ("evidence_chunks", "subject_id"): "For a tool artifact's chunk: its "
    "subject; NULL for documents.",
    ("evidence_chunks", "acl"): "Principal groups that may read it ('*': every group).",
    ("evidence_chunks", "trust"): "trusted or untrusted.",
    ("evidence_chunks", "effective_from"): "When the chunk's version took effect.",
    ("evidence_chunks", "ordinal"): "Position of the chunk in its version "
    "(reading order).",
    ("evidence_chunks", "section_path"): "Heading path of the chunk's section.",
    ("evidence_chunks", "char_start"): "Start offset of the chunk in the "
    "version's redacted text.",
    ("evidence_chunks", "char_end"): "End offset (exclusive) in that text.",
    ("evidence_chunks", "text"): "Redacted text of the chunk.",
    ("evidence_chunks", "embedding"): "MiniLM embedding (384 floats); NULL "
    "while deferred (then BM25 ranks it).",
    ("evidence_chunks", "embed_model"): "Model that computed the embedding.",
    ("evidence_chunks", "embedding_reused"): "The embedding was copied from an "
    "earlier chunk with the same text.",
    # backfill_diffs
    ("backfill_diffs", "base_snapshot"): "Snapshot the backfill compared against.",
    ("backfill_diffs", "section"): "Part of the diff: tables, redactions, "
    "memories, ledger or chunks.",
    ("backfill_diffs", "item"): "What was counted (a table, an entity type, a "
    "memory kind, ...).",
    ("backfill_diffs", "before"): "Count in the base snapshot.",
    ("backfill_diffs", "after"): "Count after the backfill.",
    ("backfill_diffs", "added"): "Rows added.",
    ("backfill_diffs", "removed"): "Rows removed.",
    ("backfill_diffs", "unchanged"): "Rows identical in both.",
    ("backfill_diffs", "updated"): "Rows kept with changed content.",
    # sources
    ("sources", "registry_version"): "Version (content hash) of the registry "
    "the row belongs to.",
    ("sources", "registry_name"): "Name of that registry.",
    ("sources", "source_id"): "Id of the source.",
    ("sources", "is_default"): "The fallback source for rows no rule matched.",
    ("sources", "kind"): "Kind of rows the source matches (document, "
    "tool_artifact, memory, ...).",
    ("sources", "match"): "Patterns that assign rows to the source.",
    ("sources", "owner"): "Team or person answerable for the source.",
    ("sources", "scope"): "Who the source's content is for (tenant, subject, global).",
    ("sources", "description"): "What the source is.",
    ("sources", "authority"): "How far pack trusts it (0-1).",
    ("sources", "freshness_half_life_days"): "Days after which freshness halves.",
    ("sources", "ttl_days"): "Days after which its items are not served.",
    ("sources", "sensitivity"): "Clearance a principal needs to be served it.",
    ("sources", "estimated_cost_tokens"): "Typical tokens an item costs.",
    ("sources", "injection_risk"): "Prompt-injection risk (high: served as untrusted).",
    ("sources", "invalidation"): "What invalidates the source's items.",
    ("sources", "invalidated"): "The source is invalidated: pack drops its items.",
    ("sources", "invalidated_reason"): "Why it was invalidated.",
    ("sources", "registry_json"): "The whole registry version as JSON.",
    ("sources", "loaded_at"): "When this registry version was stored.",
    # internal (not a record model's table)
    ("_commit_lock", "commits"): "Internal: every data commit updates this one "
    "row, so two concurrent commits conflict and one retries. Not data.",
}


def column_doc(table: str, column: str) -> str | None:
    """The fallback comment of ``table.column``, or None."""
    return BY_TABLE.get((table, column)) or COMMON.get(column)
