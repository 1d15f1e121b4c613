"""Build evidence records from a document file or a tool artifact (no Beam here).

Documents are redacted before anything else is derived from them: the body is
cut at blank lines, each piece goes through the redaction policy (the same one
transcripts use; unchanged paragraphs of a new version hit the redactor's cache),
and the redacted pieces are joined back with the original separators. Chunks
are spans of that redacted body. Embeddings are attached later (``embed``), so
this module yields ``ChunkDraft`` s: chunks without their vector.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from ctxledger.pipelines.evidence.chunking import (
    ARTIFACT_CHUNKER_VERSION,
    CHUNKER_VERSION,
    ChunkSpan,
    chunk_text,
    evidence_windows,
)
from ctxledger.pipelines.evidence.landing import (
    DocItem,
    MetadataError,
    read_sidecar,
    resolve_metadata,
    split_front_matter,
)
from ctxledger.pipelines.ingest.landing import read_regular
from ctxledger.pipelines.ingest.sources import has_surrogate
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.schemas import Artifact, DeadLetter, PiiFinding, content_hash
from ctxledger.schemas.evidence import DocumentFile, DocumentVersion, EvidenceChunk
from ctxledger.schemas.policy import Policy

STAGE_DOCS = "evidence_docs"
STAGE_ARTIFACTS = "evidence_artifacts"
STAGE_EMBED = "evidence_embed"
#: Reason of a chunk that still holds a secret after redaction (not stored).
SECRET_IN_TEXT = "secret_in_text"
#: What replaces such a chunk's span in the stored document text.
MASK = "\u2588"

#: Effective date of a tool artifact when neither its messages nor the run
#: give a time (a run always does: ``RunInfo.received_at``).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

_BLANK = re.compile(r"\n[ \t]*\r?\n(?:[ \t]*\r?\n)*")


class RedactionLike(Protocol):
    text: str
    findings: Sequence[PiiFinding]


RedactFn = Callable[[list[tuple[str, str]]], list[RedactionLike]]


@dataclass(frozen=True)
class RunInfo:
    """The run a record is built in (ids never depend on it)."""

    run_id: str
    policy_version: str
    job_version: str
    #: When this run read its input: the time of a tool output whose messages
    #: carry none (``build_artifact``). Never part of an id.
    received_at: datetime | None = None


def received_now() -> datetime:
    """The time a run received its input (``RunInfo.received_at``)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class ChunkDraft:
    """An ``EvidenceChunk`` before its embedding is known."""

    fields: dict[str, Any]

    @property
    def tenant_id(self) -> str:
        return self.fields["tenant_id"]

    @property
    def content_hash(self) -> str:
        return self.fields["content_hash"]

    @property
    def text(self) -> str:
        return self.fields["text"]

    @property
    def embed_key(self) -> tuple[str, str]:
        """What embedding reuse keys on: the tenant and the text's hash."""
        return (self.tenant_id, self.content_hash)

    def complete(
        self, embedding: Sequence[float], model: str, reused: bool
    ) -> EvidenceChunk:
        return EvidenceChunk(
            **self.fields,
            embedding=[float(v) for v in embedding],
            embed_model=model,
            embedding_reused=reused,
        )


@dataclass
class BuiltSource:
    """What one document file or artifact produced."""

    file: DocumentFile | None = None
    version: DocumentVersion | None = None
    chunks: list[ChunkDraft] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


def as_utc(when: datetime) -> datetime:
    """``when`` as an aware UTC datetime (naive values are taken as UTC)."""
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC)
    return when.astimezone(UTC)


def text_hash(text: str) -> str:
    """Hash a chunk's (or document's) text: the key of embedding reuse."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def evidence_dead_letter(
    stage: str,
    tenant_id: str,
    source_file: str,
    source_hash: str,
    offset: str,
    code: str,
    message: str,
    run: RunInfo,
) -> DeadLetter:
    """A dead letter of an evidence stage (never holds the document text)."""
    return DeadLetter(
        dead_letter_id=content_hash(
            tenant_id, source_hash, stage, offset, code, prefix="dl_"
        ),
        run_id=run.run_id,
        stage=stage,
        tenant_id=tenant_id,
        source_file=source_file,
        source_offset=offset,
        reason_code=code,
        message=message,
        job_version=run.job_version,
    )


def redact_body(body: str, redact: RedactFn) -> tuple[str, list[PiiFinding]]:
    """Redact ``body`` paragraph by paragraph; findings point into the result."""
    pieces: list[tuple[int, int]] = []
    pos = 0
    for match in _BLANK.finditer(body):
        pieces.append((pos, match.start()))
        pos = match.end()
    pieces.append((pos, len(body)))
    texts = [body[s:e] for s, e in pieces]
    wanted = [(i, t) for i, t in enumerate(texts) if t.strip()]
    results = list(redact([("document", t) for _, t in wanted])) if wanted else []
    if len(results) != len(wanted):
        raise ValueError("redactor returned a different number of texts")
    redacted = dict(enumerate(texts))
    found: dict[int, Sequence[PiiFinding]] = {}
    for (i, _), result in zip(wanted, results, strict=True):
        redacted[i] = result.text
        found[i] = result.findings
    out: list[str] = []
    findings: list[PiiFinding] = []
    offset = 0
    for i, (start, _end) in enumerate(pieces):
        if i:
            separator = body[pieces[i - 1][1] : start]
            out.append(separator)
            offset += len(separator)
        for finding in found.get(i, ()):
            findings.append(
                finding.model_copy(
                    update={
                        "field": "document",
                        "start": finding.start + offset,
                        "end": finding.end + offset,
                    }
                )
            )
        out.append(redacted[i])
        offset += len(redacted[i])
    return "".join(out), findings


def screen_secrets(
    drafts: Sequence[ChunkDraft], source_file: str, run: RunInfo
) -> tuple[list[ChunkDraft], list[DeadLetter]]:
    """Split ``drafts`` into the clean ones and a text-free dead letter per chunk
    whose text still matches a secret rule (``secret_in_text``).

    Defense in depth: the text was redacted already, so a match is a secret
    the redactor missed. Such a chunk is never embedded nor stored. Its dead
    letter is of stage ``evidence_embed`` (unit: chunk), so every chunk a
    version announces (``chunk_count``) is stored or dead-lettered, as before.
    """
    from ctxledger.pipelines.redact.residual import secret_in_text  # noqa: PLC0415

    kept: list[ChunkDraft] = []
    letters: list[DeadLetter] = []
    for draft in drafts:
        if not secret_in_text(draft.text):
            kept.append(draft)
            continue
        fields = draft.fields
        letters.append(
            evidence_dead_letter(
                STAGE_EMBED,
                fields["tenant_id"],
                source_file,
                fields["chunk_id"],
                f"chunk:{fields['ordinal']}",
                SECRET_IN_TEXT,
                "chunk text matches a secret rule after redaction; not stored",
                run,
            )
        )
    return kept, letters


def mask_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each ``(start, end)`` span blanked to ``MASK`` characters
    (line breaks kept), so the offsets of every other chunk stay valid."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        for i in range(start, end):
            if chars[i] not in "\r\n":
                chars[i] = MASK
    return "".join(chars)


def chunk_drafts(
    version: DocumentVersion,
    text: str,
    policy: Policy,
    section_root: Sequence[str] = (),
    spans: Sequence[ChunkSpan] | None = None,
) -> list[ChunkDraft]:
    """Chunks of a version's redacted ``text`` (ids are content hashes):
    ``spans`` when given (artifact windows), else all of ``text`` chunked."""
    bounds = policy.evidence.chunking
    if spans is None:
        spans = chunk_text(text, bounds.max_tokens, bounds.min_tokens)
    drafts = []
    for ordinal, span in enumerate(spans):
        chunk = text[span.char_start : span.char_end]
        digest = text_hash(chunk)
        drafts.append(
            ChunkDraft(
                {
                    "chunk_id": content_hash(
                        version.tenant_id,
                        version.doc_version_id,
                        ordinal,
                        span.char_start,
                        digest,
                        prefix="chk_",
                    ),
                    "doc_version_id": version.doc_version_id,
                    "tenant_id": version.tenant_id,
                    "doc_id": version.doc_id,
                    "doc_version": version.version,
                    "kind": version.kind,
                    "subject_id": version.subject_id,
                    "acl": list(version.acl),
                    "trust": version.trust,
                    "effective_from": version.effective_from,
                    "ordinal": ordinal,
                    "section_path": [*section_root, *span.section_path],
                    "char_start": span.char_start,
                    "char_end": span.char_end,
                    "text": chunk,
                    "content_hash": digest,
                    "token_count": span.token_count,
                    "policy_version": version.policy_version,
                    "run_id": version.run_id,
                    "source_id": version.source_id,
                }
            )
        )
    return drafts


def build_document(
    item: DocItem, policy: Policy, redact: RedactFn, run: RunInfo
) -> BuiltSource:
    """Read, redact and chunk one document file (or tombstone).

    Every item yields a ``DocumentFile`` plus either a ``DocumentVersion`` (with
    its chunks) or a dead letter: bad metadata, unreadable or non-UTF-8 bytes,
    a file that changed since discovery, or a redaction failure.
    """
    settings = policy.evidence.documents

    def fail(code: str, message: str) -> BuiltSource:
        return BuiltSource(
            file=DocumentFile(
                file_hash=item.file_hash,
                path=item.rel_path,
                tenant_id=item.tenant_id,
                size_bytes=item.size_bytes,
                status="processed",
                dead=1,
                run_id=run.run_id,
            ),
            dead_letters=[
                evidence_dead_letter(
                    STAGE_DOCS,
                    item.tenant_id,
                    item.rel_path,
                    item.file_hash,
                    "file",
                    code,
                    message,
                    run,
                )
            ],
        )

    if item.refusal:  # a FIFO, broken or escaping symlink: never read
        return fail(item.refusal, item.refusal_detail)
    if item.size_bytes > policy.limits.max_record_bytes:
        return fail("document_too_large", "document exceeds limits.max_record_bytes")
    raw = ""
    if not item.tombstone:
        try:
            data = read_regular(item.path or "")
        except OSError as exc:
            return fail("file_unreadable", f"{type(exc).__name__}")
        try:
            raw = data.decode("utf-8")
        except UnicodeDecodeError:
            return fail("not_utf8", "document is not UTF-8 text")
    try:
        sidecar = read_sidecar(item.sidecar) if item.sidecar else {}
        front, body_start = split_front_matter(raw) if raw else ({}, 0)
        meta = resolve_metadata(
            item,
            front,
            sidecar,
            settings.default_acl,
            settings.default_trust,
            fallback_version=f"sha-{item.file_hash[:8]}",
        )
    except (MetadataError, OSError, UnicodeDecodeError) as exc:
        # MetadataError messages are ours and name the field only; other errors
        # can quote the file, so only their type is kept.
        detail = str(exc) if isinstance(exc, MetadataError) else type(exc).__name__
        return fail("bad_metadata", detail[:200])
    if has_surrogate([meta.doc_id, meta.tenant_id, meta.version, meta.title, meta.acl]):
        # A "\udc80" escape in a sidecar or front matter decodes, but no encoder
        # downstream (pyarrow, DuckDB) accepts it: one dead letter, not a failed run.
        return fail("invalid_text", "metadata holds a lone surrogate code point")
    body = raw[body_start:]
    try:
        redacted, findings = redact_body(body, redact) if body.strip() else ("", [])
        title = meta.title
        if title:
            title = redact([("title", title)])[0].text
    except Exception as exc:  # noqa: BLE001 - terminal for this document
        return fail("redaction_failed", f"redactor raised {type(exc).__name__}")
    doc_version_id = content_hash(
        meta.tenant_id, meta.doc_id, meta.version, item.file_hash, prefix="dv_"
    )
    version = DocumentVersion(
        doc_version_id=doc_version_id,
        tenant_id=meta.tenant_id,
        doc_id=meta.doc_id,
        kind="document",
        version=meta.version,
        version_sort=meta.version_sort,
        effective_from=meta.effective_from,
        deleted=meta.deleted,
        title=title,
        acl=list(meta.acl),
        trust=meta.trust,  # type: ignore[arg-type]
        authority=meta.authority,
        source_path=item.rel_path,
        source_hash=item.file_hash,
        text="" if meta.deleted else redacted,
        text_hash=text_hash(redacted),
        char_count=0 if meta.deleted else len(redacted),
        token_count=0 if meta.deleted else count_tokens(redacted),
        pii=[] if meta.deleted else findings,
        metadata_source=meta.source,  # type: ignore[arg-type]
        policy_version=run.policy_version,
        chunker_version=CHUNKER_VERSION,
        run_id=run.run_id,
        source_id=policy.sources.resolve("document", meta.doc_id, item.rel_path),
    )
    drafts = [] if meta.deleted else chunk_drafts(version, redacted, policy)
    kept, letters = screen_secrets(drafts, item.rel_path, run)
    update: dict[str, Any] = {"chunk_count": len(drafts)}
    if letters:
        # the version's text must not keep what its chunk may not
        dropped = [d for d in drafts if d not in kept]
        masked = mask_spans(
            redacted, [(d.fields["char_start"], d.fields["char_end"]) for d in dropped]
        )
        update.update(text=masked, text_hash=text_hash(masked))
    version = version.model_copy(update=update)
    return BuiltSource(
        file=DocumentFile(
            file_hash=item.file_hash,
            path=item.rel_path,
            tenant_id=meta.tenant_id,
            size_bytes=item.size_bytes,
            status="processed",
            versions_out=1,
            run_id=run.run_id,
        ),
        version=version,
        chunks=kept,
        dead_letters=letters,
    )


#: The last ``artifact_spans`` answer: ``(text, policy, tokens, spans)``.
_LAST_SPANS: list[tuple[str, Policy, int, tuple[ChunkSpan, ...]] | None] = [None]


def artifact_spans(text: str, policy: Policy, tokens: int) -> list[ChunkSpan]:
    """Chunks of the evidence windows of a tool output (``evidence_windows``).

    Each chunk is still an exact span of the stored artifact text (so a quote
    can be cited); the first chunk after a gap carries the visible elision
    marker ("[... 1,234 lines omitted ...]") as its section, so a reader of a
    hit or a pack knows the output goes on around it.

    The last answer is remembered: an output seen by several subjects is
    chunked once per subject, one call after the other (``ChunkArtifactFn``),
    and its spans depend on the text and the policy only (spans are frozen).
    """
    last = _LAST_SPANS[0]
    if last is not None and last[1] is policy and last[2] == tokens and last[0] == text:
        return list(last[3])
    out = _artifact_spans(text, policy, tokens)
    _LAST_SPANS[0] = (text, policy, tokens, tuple(out))
    return out


def _artifact_spans(text: str, policy: Policy, tokens: int) -> list[ChunkSpan]:
    settings = policy.evidence.artifacts
    bounds = policy.evidence.chunking
    out: list[ChunkSpan] = []
    for window in evidence_windows(
        text,
        settings.head_tokens,
        settings.tail_tokens,
        settings.error_context_lines,
        settings.max_tokens,
        total_tokens=tokens,
    ):
        piece = text[window.start : window.end]
        for i, span in enumerate(
            chunk_text(piece, bounds.max_tokens, bounds.min_tokens)
        ):
            marker = (window.marker,) if window.marker and i == 0 else ()
            out.append(
                ChunkSpan(
                    window.start + span.char_start,
                    window.start + span.char_end,
                    marker + span.section_path,
                    span.token_count,
                    span.starts_section,
                    span.headings_only,
                )
            )
    return out


def artifact_text(content: str, policy: Policy) -> str:
    """What of a (redacted) tool output is chunked: its first ``max_chars``."""
    return content[: policy.evidence.artifacts.max_chars]


def artifact_chunk_texts(content: str, policy: Policy) -> list[str]:
    """The texts of the chunks ``build_artifact`` keeps of a tool output, in
    order: the same spans, less those ``screen_secrets`` holds back. They
    depend on the text and the policy only, so the redact stage can hand them
    to the embed-ahead helper (``pipelines.evidence.ahead``) long before the
    evidence stage chunks the output."""
    from ctxledger.pipelines.redact.residual import secret_in_text  # noqa: PLC0415

    text = artifact_text(content, policy)
    spans = artifact_spans(text, policy, count_tokens(text))
    pieces = (text[span.char_start : span.char_end] for span in spans)
    return [piece for piece in pieces if not secret_in_text(piece)]


def build_artifact(
    artifact: Artifact,
    policy: Policy,
    run: RunInfo,
    observed_at: datetime | None = None,
    tool_name: str | None = None,
    subject_id: str | None = None,
) -> BuiltSource:
    """Chunk one (already redacted) tool output as evidence kind ``tool_artifact``.

    The artifact id is the document id. The output belongs to ``subject_id``,
    the subject of the session that produced it (``subject_for``): search and
    pack serve it to that subject's requests and to the policy's operator
    groups only (``acl`` records those groups). The same output seen in the
    sessions of two subjects is two versions, one per subject (the subject is
    part of the version id), each effective from the earliest message of that
    subject that carried it (``observed_at``). Messages without a timestamp
    (SWE-agent, tau-bench and ToolBench transcripts have none) give it the time
    the run received them (``run.received_at``): dated 1970, its freshness
    would be 0 and ``pack`` would never select it.
    """
    settings = policy.evidence.artifacts
    text = artifact_text(artifact.content, policy)
    tokens = count_tokens(text)
    owner = () if subject_id is None else (subject_id,)
    version = DocumentVersion(
        doc_version_id=content_hash(
            artifact.tenant_id, artifact.artifact_id, *owner, prefix="dv_"
        ),
        tenant_id=artifact.tenant_id,
        doc_id=artifact.artifact_id,
        kind="tool_artifact",
        subject_id=subject_id,
        version="1",
        version_sort="1",
        effective_from=observed_at or run.received_at or EPOCH,
        title=tool_name,
        acl=list(settings.operator_groups),
        trust=settings.trust,
        source_path=f"artifacts/{artifact.artifact_id}",
        source_hash=artifact.artifact_id,
        text="",
        text_hash=text_hash(text),
        char_count=len(text),
        token_count=tokens,
        metadata_source="artifact",
        policy_version=artifact.policy_version,
        chunker_version=ARTIFACT_CHUNKER_VERSION,
        run_id=run.run_id,
        source_id=policy.sources.resolve("tool_artifact", tool_name),
    )
    drafts = chunk_drafts(
        version,
        text,
        policy,
        section_root=[tool_name] if tool_name else [],
        spans=artifact_spans(text, policy, tokens),
    )
    kept, letters = screen_secrets(drafts, version.source_path, run)
    return BuiltSource(
        version=version.model_copy(update={"chunk_count": len(drafts)}),
        chunks=kept,
        dead_letters=letters,
    )
