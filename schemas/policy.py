"""The versioned redaction and retention policy (a frozen, strict pydantic model).

A policy is loaded from YAML (``load_policy``). Its ``policy_version`` is the human
label plus a short content hash of the canonical JSON of the whole policy, so two
files that differ in any setting get different versions, and re-saving the same
settings (other key order, comments) keeps the version: the hash, not the file,
is the identity (DESIGN §3.7). A policy the jobs load also carries the fingerprint
of the detector that applies it (``with_detector``; computed by
``pipelines.redact.fingerprint``), appended to the version as ``.<hex8>``: the
same file under changed recognizer code, lexicons or model packages is another
version, so rows redacted by an older detector can be told apart (issue 29).

Loading fails closed (``PolicyError``): a file that parses to nothing, is not a
mapping, names no entity type (or only ``keep`` ones), or breaks the model is an
error, one line per problem, each naming ``file:line``. Entity types and secret
recognizer names are checked against the detectors' registry when the caller
passes one (``pipelines.redact.registry.load_checked_policy`` does; schemas
cannot import the stage that owns the registry).

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

import difflib
import hashlib
import re
from collections.abc import Collection
from functools import cached_property
from pathlib import Path
from typing import Any, Literal, Protocol

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from ctxledger.schemas.base import canonical_json
from ctxledger.schemas.evidence import EvidenceSettings
from ctxledger.schemas.ledger import PROTECTED_KINDS, ProtectedKind
from ctxledger.schemas.memory import MemorySettings
from ctxledger.schemas.sources import SourceRegistry

#: An entity type name (``PERSON``, ``US_SSN``).
_TYPE_PATTERN = r"^[A-Z][A-Z0-9_]*$"

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

    type: str = Field(pattern=_TYPE_PATTERN)
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
    #: spaCy model: a model package, a vendored one (``ner.VENDORED_MODELS``:
    #: en_core_web_md measured better on text we never tuned on, issue 29) or a
    #: model folder.
    ner_model: str = "en_core_web_md"
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
    #: Fingerprint of the detector that applies this policy (``with_detector``);
    #: not a setting (a file cannot set it) and not part of ``content_hash``.
    _detector: str = PrivateAttr(default="")

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
        """``"{version}+{sha256(canonical policy json)[:8]}"``, then
        ``".{detector[:8]}"`` when a detector fingerprint is attached."""
        base = f"{self.version}+{self.content_hash[:8]}"
        return f"{base}.{self._detector[:8]}" if self._detector else base

    @property
    def detector(self) -> str:
        """The attached detector fingerprint (full hex), or ``""``."""
        return self._detector

    def with_detector(self, fingerprint: str) -> Policy:
        """A copy whose ``policy_version`` also names ``fingerprint``."""
        copy = self.model_copy()
        copy._detector = fingerprint
        return copy

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


class PolicyError(ValueError):
    """A policy file that must not be used; ``problems`` holds one line each,
    ``file:line: where: what``, and ``str()`` joins them with newlines."""

    def __init__(self, problems: Collection[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(self.problems))


class DetectorRegistry(Protocol):
    """What the detectors can do, for checking a policy against them
    (``pipelines.redact.registry.REGISTRY``)."""

    def unknown_entity_types(
        self, names: Collection[str], language: str
    ) -> frozenset[str]:
        """The names no detector produces."""

    def known_entity_types(self) -> frozenset[str]:
        """Types our own detectors produce (for "did you mean" hints)."""

    @property
    def secret_rules(self) -> frozenset[str]:
        """Names of the secret detectors ``pii.secrets.recognizers`` switches."""


def _line_of(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """1-based line of the deepest node of ``loc`` that exists in ``root``
    (a mapping key's own line for the last step, so an unknown key points at
    itself)."""
    node, line = root, 1
    if node is not None:
        line = node.start_mark.line + 1
    for step in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == step:
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if not 0 <= step < len(node.value):
                return line
            node = node.value[step]
            line = node.start_mark.line + 1
        else:
            return line
    if node is not None and not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        line = node.start_mark.line + 1
    return line


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for step in loc:
        if isinstance(step, int):
            out += f"[{step}]"
        else:
            out += ("." if out else "") + str(step)
    return out


def _shown(value: Any) -> str:
    if isinstance(value, dict | list | tuple):
        return ""
    text = repr(value)
    return f" (got {text[:40]}{'...' if len(text) > 40 else ''})"


class _Problems:
    """Collects ``file:line: where: what`` lines; the YAML node tree (for line
    numbers) is composed only when there is something to report."""

    def __init__(self, source: Path, text: str) -> None:
        self.source, self.text = source, text
        self._found: list[tuple[int, str]] = []
        self._root: yaml.Node | None | bool = False

    def root(self) -> yaml.Node | None:
        if self._root is False:
            self._root = yaml.compose(self.text, Loader=_SAFE_LOADER)
        return self._root  # type: ignore[return-value]

    def add(self, loc: tuple[Any, ...], message: str) -> None:
        line = _line_of(self.root(), loc)
        where = f"{_where(loc)}: " if loc else ""
        self._found.append((line, f"{self.source}:{line}: {where}{message}"))

    @property
    def lines(self) -> list[str]:
        """The problems in file order."""
        return [text for _, text in sorted(self._found, key=lambda f: f[0])]


def _validation_problems(problems: _Problems, exc: ValidationError) -> None:
    for error in exc.errors(include_url=False):
        loc = tuple(error["loc"])
        message = error["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, ") :]
        if error["type"] == "extra_forbidden":
            message = "unknown setting (a typo?)"
        elif error["type"] not in ("missing",):
            message += _shown(error.get("input"))
        problems.add(loc, message)


_TYPE_NAME = re.compile(_TYPE_PATTERN)


def _is_type_name(value: Any) -> bool:
    return isinstance(value, str) and _TYPE_NAME.match(value) is not None


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _registry_problems(
    problems: _Problems, data: dict, registry: DetectorRegistry
) -> None:
    """Names no detector knows, read from the parsed file itself, so they are
    reported together with any model errors."""
    pii = _mapping(data.get("pii"))
    language = pii.get("language") if isinstance(pii.get("language"), str) else "en"
    entities = pii.get("entities") if isinstance(pii.get("entities"), list) else []
    # Malformed names are the model's to report (one line per problem).
    types = {
        i: rule["type"]
        for i, rule in enumerate(entities)
        if isinstance(rule, dict) and _is_type_name(rule.get("type"))
    }
    json_keys = {
        k: v for k, v in _mapping(pii.get("json_keys")).items() if _is_type_name(v)
    }
    unknown = registry.unknown_entity_types(
        {*types.values(), *json_keys.values()}, language
    )
    known = sorted(registry.known_entity_types())

    def hint(name: str) -> str:
        close = difflib.get_close_matches(name, known, n=1)
        return f" (did you mean {close[0]}?)" if close else ""

    for i, etype in types.items():
        if etype in unknown:
            problems.add(
                ("pii", "entities", i, "type"),
                f"unknown entity type {etype!r}: no detector produces it" + hint(etype),
            )
    for key, etype in json_keys.items():
        if etype in unknown:
            problems.add(
                ("pii", "json_keys", key),
                f"unknown entity type {etype!r}" + hint(etype),
            )
    switches = _mapping(_mapping(pii.get("secrets")).get("recognizers"))
    for name in sorted(set(map(str, switches)) - registry.secret_rules):
        problems.add(
            ("pii", "secrets", "recognizers", name),
            f"unknown secret recognizer {name!r}",
        )


def _parse(source: Path, text: str) -> Any:
    try:
        # libyaml's safe loader when built in: same YAML, about 10x faster on
        # the default policy, which every job and worker loads.
        return yaml.load(text, Loader=_SAFE_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else str(source)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        started = getattr(exc, "context_mark", None)
        if context and started is not None and started is not mark:
            context += f" at line {started.line + 1}"
        raise PolicyError(
            [f"{where}: YAML error: {what}" + (f" ({context})" if context else "")]
        ) from None


def load_policy(
    path: str | Path | None = None, *, registry: DetectorRegistry | None = None
) -> Policy:
    """Load and check a policy YAML file; ``None`` loads the packaged default.

    Raises ``PolicyError`` (one ``file:line: ...`` line per problem) for a
    file that is empty, not a mapping, invalid, names no entity type or only
    ``keep`` ones, or (with ``registry``) names an entity type or secret
    recognizer no detector knows. Jobs load through
    ``pipelines.redact.registry.load_checked_policy``, which passes the
    registry and attaches the detector fingerprint.
    """
    source = Path(path) if path is not None else DEFAULT_POLICY_PATH
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise PolicyError([f"{source}: cannot read the policy: {reason}"]) from None
    data = _parse(source, text)
    problems = _Problems(source, text)
    if data is None:
        problems.add((), "the policy is empty: it must name the entity types "
                     "to redact under pii.entities")  # fmt: skip
        raise PolicyError(problems.lines)
    if not isinstance(data, dict):
        kind = type(data).__name__
        problems.add((), f"the policy must be a mapping of settings, not a {kind}")
        raise PolicyError(problems.lines)
    if registry is not None:
        _registry_problems(problems, data, registry)
    try:
        policy = policy_from_mapping(data)
    except ValidationError as exc:
        _validation_problems(problems, exc)
        raise PolicyError(problems.lines) from None
    if not policy.pii.entities:
        problems.add(
            ("pii", "entities"),
            "names no entity type: nothing would be redacted (list the types "
            "to detect, as in policies/default.yaml)",
        )
    elif all(rule.operator == "keep" for rule in policy.pii.entities):
        problems.add(
            ("pii", "entities"),
            "every entity type is 'keep': nothing would be redacted",
        )
    if problems.lines:
        raise PolicyError(problems.lines)
    return policy
