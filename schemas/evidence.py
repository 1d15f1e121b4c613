"""Evidence records: versioned documents, their chunks with embeddings, and the
context manifest a context builder gets from ``pack``.

Documents are append-only. Every ingested version is one ``DocumentVersion`` row
(a deletion is a version row with ``deleted=True``, a *tombstone*); its chunks are
``EvidenceChunk`` rows that never change after they are written. A version is
effective from its ``effective_from`` until the next version (or tombstone) of the
same document takes over: that *closing* ``effective_to`` is derived from the
version rows (``warehouse.evidence_api``), so nothing is ever rewritten in place
and older versions stay queryable by ``as_of`` and by DuckLake time travel.

Texts here are always redacted: documents go through the same redaction policy
as transcripts before they are chunked.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ctxledger.schemas.arrow import Float32
from ctxledger.schemas.base import Record
from ctxledger.schemas.transcript import PiiFinding

#: Width of the MiniLM sentence embeddings stored with every chunk.
EMBEDDING_DIM = 384


def checked_embedding(value: list[float] | None) -> list[float] | None:
    """An ``embedding`` field's value, refused unless it has ``EMBEDDING_DIM``
    values (chunks and memories share the model, so the width)."""
    if value is not None and len(value) != EMBEDDING_DIM:
        raise ValueError(f"embedding must have {EMBEDDING_DIM} values")
    return value


#: The group that lets every principal of the tenant see a document.
ALL_GROUPS = "*"

EvidenceKind = Literal["document", "tool_artifact"]
Trust = Literal["trusted", "untrusted"]
Precision = Literal["auto", "fp32", "bf16"]
EmbeddingBackend = Literal["torch", "onnx-int8"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ----------------------------------------------------------------------- policy
class ChunkingSettings(_Strict):
    """Chunk size bounds in cl100k tokens (``pipelines.evidence.chunking``).

    A heading always starts a new chunk; paragraphs of one section are packed up
    to ``max_tokens``; a trailing piece under ``min_tokens`` joins the chunk
    before it when both fit. Keep ``max_tokens`` near 200: MiniLM reads at most
    256 word pieces, anything longer is truncated when it is embedded.
    """

    min_tokens: int = Field(default=40, ge=0)
    max_tokens: int = Field(default=200, ge=8)

    @model_validator(mode="after")
    def _bounds(self) -> ChunkingSettings:
        if self.min_tokens > self.max_tokens:
            raise ValueError("chunking.min_tokens must be <= max_tokens")
        return self


class EmbeddingSettings(_Strict):
    """The sentence-transformers model and how it runs on each worker."""

    #: Model name stored with every vector; a different name re-embeds.
    model: str = "all-MiniLM-L6-v2"
    #: ``max_batch_size``: texts per forward pass at most (passes are formed
    #: by word-piece budget within calls of up to ``batching.CALL_TEXTS``
    #: texts, and a failed call is retried in parts of this size).
    #: ``min_batch_size`` is no longer read (kept so existing policies load).
    min_batch_size: int = Field(default=16, ge=1)
    max_batch_size: int = Field(default=64, ge=1)
    #: ``auto``: bf16 autocast only on CPUs with native bf16 (AVX512-BF16/AMX);
    #: on AVX2-only CPUs bf16 is emulated and slower than fp32.
    precision: Precision = "auto"
    #: ``torch``: MiniLM on torch at ``precision`` (``pipelines.minilm``: the
    #: vectors of sentence-transformers, without importing it).
    #: ``onnx-int8``: ONNX Runtime with int8 weights (``pipelines.onnx_minilm``),
    #: exported once per machine; cosine to fp32 ~0.99 (``bench/bench_embed.py``
    #: measures speed, cosine and recall@10 of both on this CPU).
    backend: EmbeddingBackend = "torch"
    #: torch threads per worker; 0 leaves torch's default. Also the most
    #: passes of one call that run side by side, one thread each
    #: (``MiniLM.encode``): 1 runs them one after the other.
    torch_threads: int = Field(default=0, ge=0)
    #: ``inline``: the nightly embeds new chunk texts itself. ``deferred``: the
    #: nightly commits new chunks without a vector (text and BM25 are searchable
    #: at once, no model is loaded) and ``ctxledger embed`` fills the vectors
    #: later in a snapshot of its own, e.g. on a GPU worker.
    mode: Literal["inline", "deferred"] = "inline"
    #: Inline mode, all stages in one process (the local DirectRunner without
    #: worker processes): embed tool outputs' chunk texts in a helper process
    #: while the run redacts, on the core the Python stages leave idle
    #: (``pipelines.evidence.ahead``). Same vectors on every run either way.
    ahead: bool = True


class DocumentSettings(_Strict):
    """Defaults for documents whose metadata does not say (docs/evidence.md)."""

    suffixes: tuple[str, ...] = (".md", ".markdown", ".txt")
    default_acl: tuple[str, ...] = (ALL_GROUPS,)
    default_trust: Trust = "untrusted"


class ArtifactSettings(_Strict):
    """Tool outputs (``artifacts`` rows) chunked as evidence kind ``tool_artifact``.

    A tool output belongs to the subject of the session that produced it (an
    order history, an account lookup): search and ``pack`` serve it only to a
    request for that same subject, or to a principal in one of
    ``operator_groups`` (support staff who may look across subjects). There is
    no tenant-wide ACL for artifacts; ``"*"`` is refused here for that reason.
    """

    #: Principal groups that see every tool artifact of their tenant.
    operator_groups: tuple[str, ...] = ("operators",)
    trust: Trust = "untrusted"
    #: Longer outputs are cut to this many characters before chunking.
    max_chars: int = Field(default=200_000, ge=1_000)
    #: Embed what is retrieved: an output over ``max_tokens`` (cl100k) keeps
    #: only its first ``head_tokens``, its last ``tail_tokens`` and, within the
    #: rest of ``max_tokens``, the lines reporting a failure with
    #: ``error_context_lines`` around each (``chunking.evidence_windows``).
    #: Smaller outputs stay whole.
    max_tokens: int = Field(default=512, ge=1)
    head_tokens: int = Field(default=200, ge=0)
    tail_tokens: int = Field(default=100, ge=0)
    error_context_lines: int = Field(default=2, ge=0)

    @field_validator("operator_groups")
    @classmethod
    def _no_wildcard(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if ALL_GROUPS in value or any(not g for g in value):
            raise ValueError(
                "artifacts.operator_groups names groups; '*' (every principal) "
                "would share one subject's tool outputs with the whole tenant"
            )
        return value


class SearchSettings(_Strict):
    """Hybrid search: BM25 + cosine, fused by weighted reciprocal rank fusion."""

    candidates: int = Field(default=20, ge=1)
    rrf_k: int = Field(default=60, ge=1)
    bm25_weight: float = Field(default=1.0, ge=0.0)
    vector_weight: float = Field(default=1.0, ge=0.0)
    bm25_k1: float = Field(default=1.2, gt=0.0)
    bm25_b: float = Field(default=0.75, ge=0.0, le=1.0)
    #: Scopes up to this many chunks are ranked by exact cosine; larger ones
    #: probe an IVF index (when one is built) and rank its rows exactly.
    exact_max_rows: int = Field(default=20_000, ge=1)
    #: Build an IVF index over the vectors from this many chunks on (0: never).
    ivf_min_rows: int = Field(default=50_000, ge=0)
    #: Share of the IVF lists probed per query (nearest centroids first).
    ivf_probe_fraction: float = Field(default=0.08, gt=0.0, le=1.0)


class PackSettings(_Strict):
    """Scoring of ``pack``: relevance x authority x freshness - redundancy."""

    #: Authority of evidence by trust, unless the document sets its own.
    trusted_authority: float = Field(default=1.0, ge=0.0, le=1.0)
    untrusted_authority: float = Field(default=0.6, ge=0.0, le=1.0)
    artifact_authority: float = Field(default=0.5, ge=0.0, le=1.0)
    #: Authority of memories served as facts and as hypotheses.
    fact_authority: float = Field(default=0.9, ge=0.0, le=1.0)
    hypothesis_authority: float = Field(default=0.3, ge=0.0, le=1.0)
    #: Freshness halves every this many days since an item became effective.
    freshness_half_life_days: float = Field(default=365.0, gt=0.0)
    #: Redundancy is repeated *text*, not a shared topic or document: an item
    #: loses ``redundancy_weight x its value x overlap``, where overlap is the
    #: share of its word shingles already in the selected text (0 for a
    #: sibling chunk that says something else). 0 turns redundancy off.
    redundancy_weight: float = Field(default=1.0, ge=0.0)
    #: Words per shingle (``serving.evidence_pack.shingles``).
    shingle_words: int = Field(default=5, ge=1)
    #: A near-duplicate of a selected item is dropped (``near_duplicate``): its
    #: shingle overlap is at least this, or its cosine to that item's text is.
    near_duplicate_overlap: float = Field(default=0.8, gt=0.0, le=1.0)
    near_duplicate_cosine: float = Field(default=0.95, gt=0.0, le=1.0)
    #: Items whose cosine to the query is below this are dropped
    #: (``low_relevance``): filling the window with unrelated text helps nobody.
    min_relevance: float = Field(default=0.1, ge=0.0, le=1.0)
    #: An item of low trust (``untrusted``: a forum post, a model's hypothesis)
    #: is selected only when its cosine to the query reaches this, never as
    #: filler (``untrusted_low_relevance``). The seed's forum post answering
    #: the question it is packed for scores 0.24.
    untrusted_min_relevance: float = Field(default=0.2, ge=0.0, le=1.0)
    #: The same floor, higher, for an item of high injection risk (its
    #: source's ``injection_risk``, or text that reads as instructions): an
    #: injected wiki chunk scored up to 0.3 against unrelated on-call questions.
    high_risk_min_relevance: float = Field(default=0.4, ge=0.0, le=1.0)
    #: Utility loses this for an item of medium / high injection risk (the
    #: seed's ``- injection_risk`` term); instruction-like text is ``high``.
    medium_risk_penalty: float = Field(default=0.05, ge=0.0)
    high_risk_penalty: float = Field(default=0.15, ge=0.0)
    #: Evidence candidates fetched per request (before scoring); ``pack`` asks
    #: for more (doubling, up to ``max_candidates``) until the candidates hold
    #: ``fill_factor`` x the budget in tokens, so a large budget can be filled.
    candidates: int = Field(default=20, ge=1)
    max_candidates: int = Field(default=320, ge=1)
    fill_factor: float = Field(default=2.0, ge=0.0)


class EvidenceSettings(_Strict):
    """The ``evidence`` section of the policy (see docs/evidence.md)."""

    chunking: ChunkingSettings = ChunkingSettings()
    embedding: EmbeddingSettings = EmbeddingSettings()
    documents: DocumentSettings = DocumentSettings()
    artifacts: ArtifactSettings = ArtifactSettings()
    search: SearchSettings = SearchSettings()
    pack: PackSettings = PackSettings()


# ---------------------------------------------------------------------- records
class DocumentFile(Record):
    """A document landing file a run read, by content hash (like ``landing_files``).

    ``versions_out`` is 1 when it became a ``DocumentVersion`` row, ``dead`` is 1
    when it became a dead letter instead; the evidence stage count checks that
    every file is exactly one of the two.
    """

    table: ClassVar[str | None] = "document_files"
    key: ClassVar[tuple[str, ...]] = ("file_hash", "path", "run_id")

    file_hash: str
    path: str
    tenant_id: str
    size_bytes: int
    status: Literal["processed", "unreadable"] = "processed"
    versions_out: int = 0
    dead: int = 0
    run_id: str = ""


class DocumentVersion(Record):
    """One version of a document (or a tool artifact), redacted, append-only.

    ``effective_from`` is when this version took effect; it stays effective until
    the next version or tombstone of ``(tenant_id, doc_id)``, ordered by
    ``(effective_from, version_sort)``. ``text`` is the redacted body that chunk
    spans point into (empty for tool artifacts: theirs is ``artifacts.content``).
    """

    table: ClassVar[str | None] = "documents"
    key: ClassVar[tuple[str, ...]] = ("doc_version_id",)

    doc_version_id: str
    tenant_id: str
    doc_id: str
    kind: EvidenceKind = "document"
    #: Tool artifacts only: the subject of the session that produced it
    #: (``pipelines.memory.subjects.subject_for``); None for documents.
    subject_id: str | None = None
    version: str
    version_sort: str
    effective_from: datetime
    deleted: bool = False
    title: str | None = None
    acl: list[str] = Field(default_factory=list)
    trust: Trust = "untrusted"
    authority: float | None = None
    source_path: str
    source_hash: str
    text: str = ""
    text_hash: str
    char_count: int = Field(default=0, ge=0)
    token_count: int = Field(default=0, ge=0)
    chunk_count: int = Field(default=0, ge=0)
    pii: list[PiiFinding] = Field(default_factory=list)
    metadata_source: Literal[
        "sidecar", "front_matter", "manifest", "file_name", "fallback", "artifact"
    ] = "fallback"
    policy_version: str
    chunker_version: str
    run_id: str = ""
    #: The registered source (``schemas.sources``); NULL in rows written before.
    source_id: str | None = None


class EvidenceChunk(Record):
    """A section-aware piece of one document version, with its embedding.

    ``text == document text[char_start:char_end]`` exactly, so a quote can be
    cited. ``content_hash`` (of the text) is what embedding reuse keys on: a
    chunk whose text did not change between versions gets the stored vector
    (``embedding_reused``) instead of being embedded again.
    """

    table: ClassVar[str | None] = "evidence_chunks"
    key: ClassVar[tuple[str, ...]] = ("chunk_id",)

    chunk_id: str
    doc_version_id: str
    tenant_id: str
    doc_id: str
    doc_version: str
    kind: EvidenceKind = "document"
    #: Tool artifacts only: whose session produced it (see ``DocumentVersion``).
    subject_id: str | None = None
    acl: list[str] = Field(default_factory=list)
    trust: Trust = "untrusted"
    effective_from: datetime
    ordinal: int = Field(ge=0)
    section_path: list[str] = Field(default_factory=list)
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    text: str
    content_hash: str
    token_count: int = Field(ge=0)
    #: None: embedding deferred (``evidence.embedding.mode: deferred``) and not
    #: filled in yet by ``ctxledger embed``; search ranks the chunk by BM25 only.
    embedding: list[Float32] | None = None
    #: The model that embedded the chunk, or that will (pending rows).
    embed_model: str
    embedding_reused: bool = False
    policy_version: str
    run_id: str = ""
    #: The registered source (``schemas.sources``); NULL in rows written before.
    source_id: str | None = None

    @field_validator("embedding")
    @classmethod
    def _width(cls, value: list[float] | None) -> list[float] | None:
        return checked_embedding(value)

    @model_validator(mode="after")
    def _span(self) -> EvidenceChunk:
        if self.char_end - self.char_start != len(self.text):
            raise ValueError("char_end - char_start must equal len(text)")
        return self


# --------------------------------------------------------------- query results
class SearchHit(_Strict):
    """One chunk returned by ``search_evidence``, with each score that ranked it.

    ``bm25``/``cosine`` are the raw scores (None when the chunk was not in that
    list's candidates), ``*_rank`` are 1-based ranks in those lists, ``fused`` is
    the weighted reciprocal-rank-fusion score the results are ordered by.
    ``ranked_by`` is ``bm25`` when the chunk has no vector yet (deferred
    embedding not filled in): it could only be found by its words.
    """

    chunk_id: str
    doc_id: str
    doc_version: str
    doc_version_id: str
    kind: EvidenceKind
    tenant_id: str
    subject_id: str | None = None
    section_path: list[str]
    char_start: int
    char_end: int
    text: str
    token_count: int
    content_hash: str
    trust: Trust
    authority: float | None = None
    effective_from: datetime
    effective_to: datetime | None = None
    bm25: float | None = None
    bm25_rank: int | None = None
    cosine: float | None = None
    cosine_rank: int | None = None
    fused: float
    ranked_by: Literal["hybrid", "bm25"] = "hybrid"


ItemKind = Literal["evidence", "tool_artifact", "fact", "hypothesis", "tool"]
DropReason = Literal[
    "non_positive_utility",
    "over_budget",
    "duplicate",
    "near_duplicate",
    "low_relevance",
    "untrusted_low_relevance",
    "superseded",
    "source_invalidated",
    "source_expired",
]


class ContextScores(_Strict):
    """How ``pack`` valued an item: utility = relevance x authority x freshness -
    redundancy (redundancy against the items selected before it)."""

    relevance: float
    authority: float
    freshness: float
    redundancy: float = 0.0
    utility: float


class ContextItem(_Strict):
    """One item a context builder got (or was refused), as in the seed article.

    ``content`` is what goes into the model's context: retrieved text always
    sits inside a data envelope (``pipelines.evidence.envelope``), never as
    instructions; ``instruction_like`` flags text that reads like a command.
    Adjacent selected chunks of one document version are one item, in reading
    order: ``chunk_ids`` lists them (``item_id`` is the chunk id when there
    is one part) and the span runs from the first to the last.
    """

    item_id: str
    kind: ItemKind
    source: str
    trust: Trust
    retrieved_at: datetime
    version: str
    token_count: int = Field(ge=0)
    content: str
    mandatory: bool = False
    instruction_like: bool = False
    doc_id: str | None = None
    section_path: list[str] = Field(default_factory=list)
    char_start: int | None = None
    char_end: int | None = None
    effective_from: datetime | None = None
    chunk_ids: list[str] = Field(default_factory=list)
    scores: ContextScores
    #: The registered source (``schemas.sources``), its owner, the registry
    #: version that valued the item, and the source's injection risk.
    source_id: str | None = None
    source_owner: str | None = None
    registry_version: str | None = None
    injection_risk: str | None = None


class DroppedItem(_Strict):
    """A candidate ``pack`` did not select, and why: ``duplicate_of`` names the
    selected item a ``duplicate`` / ``near_duplicate`` repeats, ``superseded_by``
    the version that replaced a ``superseded`` one.

    The summary (id, kind, source, token count, scores) says what was left
    out and why without its text: a manifest lists two or three times as
    many dropped items as selected ones, and their envelopes were most of a
    pack's JSON (~190 KB of 2,000-token packs) and of its building.
    ``item`` is the full ``ContextItem`` (with ``content``) only when the
    request asked for it (``PackRequest.include_dropped_content``), e.g. to
    read a dropped item's headings (``serving.context_checks``)."""

    item_id: str
    kind: ItemKind
    source: str
    token_count: int = Field(ge=0)
    scores: ContextScores
    reason: DropReason
    duplicate_of: str | None = None
    superseded_by: str | None = None
    item: ContextItem | None = Field(
        default=None,
        description="The full item with its content; only when the request set "
        "include_dropped_content.",
    )


#: The largest token count a pack request may name (window, output,
#: overhead): 100x today's largest model windows, and far inside the 64-bit
#: integers the server's JSON writer takes (``window_tokens=10**30`` was a
#: bare 500 over HTTP; issue 32).
MAX_REQUEST_TOKENS = 100_000_000
#: The most evidence candidates a request may ask for (search and pack).
MAX_REQUEST_CANDIDATES = 1000


class PackRequest(_Strict):
    """What a context builder asks ``pack`` for.

    The budget for retrieved items is ``window_tokens - max_output_tokens -
    overhead_tokens``. ``mandatory`` lists item ids (chunk or memory ids) that
    must be selected; ``pack`` raises when they cannot all fit.
    """

    tenant_id: str
    subject_id: str | None = None
    purpose: str | None = None
    principal_groups: list[str] = Field(default_factory=list)
    query: str
    window_tokens: int = Field(gt=0, le=MAX_REQUEST_TOKENS)
    max_output_tokens: int = Field(default=0, ge=0, le=MAX_REQUEST_TOKENS)
    overhead_tokens: int = Field(default=0, ge=0, le=MAX_REQUEST_TOKENS)
    mandatory: list[str] = Field(default_factory=list)
    as_of: datetime | None = None
    now: datetime | None = None
    candidates: int | None = Field(default=None, ge=1, le=MAX_REQUEST_CANDIDATES)
    include_memories: bool = True
    include_evidence: bool = True
    #: List each dropped item in full (``DroppedItem.item``, with its
    #: content) as well as its summary. It changes what the manifest shows,
    #: never what is selected, so it is not part of the ``manifest_id``.
    include_dropped_content: bool = False

    @property
    def budget_tokens(self) -> int:
        """Tokens left for retrieved items."""
        return self.window_tokens - self.max_output_tokens - self.overhead_tokens


class ContextManifest(_Strict):
    """What ``pack`` selected and dropped (with reasons), and the budget used."""

    manifest_id: str
    tenant_id: str
    subject_id: str | None = None
    purpose: str | None = None
    principal_groups: list[str]
    query: str
    created_at: datetime
    as_of: datetime | None = None
    window_tokens: int
    max_output_tokens: int
    overhead_tokens: int
    budget_tokens: int
    used_tokens: int
    #: The source registry version ``pack`` valued the items with.
    registry_version: str | None = None
    selected: list[ContextItem]
    dropped: list[DroppedItem]
    notes: list[str] = Field(default_factory=list)
