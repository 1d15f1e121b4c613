"""presidio adapters: our detectors as presidio recognizers, and our operators.

Imports presidio, so only ``Redactor.setup()`` (or a caller that wants a presidio
``AnalyzerEngine``) imports this module.

* ``TokenSecretRecognizer``: one presidio ``PatternRecognizer`` per self-identifying
  secret format (``secrets.TOKEN_RULES``), validator included.
* ``ContextSecretRecognizer``: an ``EntityRecognizer`` for the keyword rules
  (``password=...``, ``Authorization: Bearer ...``), whose span is the value only.
* ``FastPiiRecognizer``: our pattern PII (e-mail, phone, card, IBAN, SSN, IP,
  street address) as one ``EntityRecognizer``.
* ``build_analyzer(policy)``: a presidio ``AnalyzerEngine`` whose registry holds the
  above plus presidio's spaCy recognizer on the slim pipeline, for callers that want
  presidio's API (the ``Redactor`` fast path does not go through it).
* ``PseudonymOperator`` / ``MaskOperator``: re-exported from
  ``pipelines.redact.operators`` (which does not import presidio's analyzer).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from presidio_analyzer import (
    AnalysisExplanation,
    EntityRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerResult,
)

from ctxledger.pipelines.redact.offline import ensure_offline_tldextract
from ctxledger.pipelines.redact.operators import MaskOperator, PseudonymOperator  # noqa: F401
from ctxledger.pipelines.redact.patterns import (
    PATTERN_DETECTORS,
    PhoneFinder,
    find_addresses,
)
from ctxledger.pipelines.redact.secrets import (
    TOKEN_RULES,
    SecretConfig,
    SecretDetector,
    TokenRule,
)
from ctxledger.pipelines.redact.spans import SECRET_TYPES, Detection

ensure_offline_tldextract()


def _to_result(det: Detection, recognizer: EntityRecognizer) -> RecognizerResult:
    name = recognizer.name
    return RecognizerResult(
        entity_type=det.entity_type,
        start=det.start,
        end=det.end,
        score=det.score,
        analysis_explanation=AnalysisExplanation(
            recognizer=name,
            original_score=det.score,
            textual_explanation=det.recognizer,
        ),
        recognition_metadata={
            RecognizerResult.RECOGNIZER_NAME_KEY: name,
            RecognizerResult.RECOGNIZER_IDENTIFIER_KEY: recognizer.id,
        },
    )


class TokenSecretRecognizer(PatternRecognizer):
    """A presidio ``PatternRecognizer`` for one ``secrets.TokenRule``."""

    def __init__(self, rule: TokenRule) -> None:
        self.rule = rule
        super().__init__(
            supported_entity=rule.entity_type,
            name=f"secret_{rule.name}_{rule.entity_type.lower()}",
            patterns=[Pattern(rule.name, rule.regex, rule.score)],
            global_regex_flags=rule.flags,
        )

    def validate_result(self, pattern_text: str) -> bool | None:  # noqa: D102
        if self.rule.validator is None:
            return None
        return bool(self.rule.validator(pattern_text))


class ContextSecretRecognizer(EntityRecognizer):
    """Keyword-named secrets (``password=``, bearer tokens, URL credentials...)."""

    ENTITIES = ["PASSWORD", "SECRET", "AWS_SECRET_KEY"]

    def __init__(self, config: SecretConfig | None = None) -> None:
        cfg = config or SecretConfig()
        token_rules = frozenset(r.name for r in TOKEN_RULES)
        self._detector = SecretDetector(
            SecretConfig(
                min_entropy=cfg.min_entropy,
                min_length=cfg.min_length,
                password_min_entropy=cfg.password_min_entropy,
                password_min_length=cfg.password_min_length,
                honor_allowlist_pragma=cfg.honor_allowlist_pragma,
                disabled=cfg.disabled | token_rules,
            ),
            self.ENTITIES,
        )
        super().__init__(
            supported_entities=list(self.ENTITIES), name="ContextSecretRecognizer"
        )

    def load(self) -> None:  # noqa: D102
        pass

    def analyze(  # noqa: D102
        self, text: str, entities: list[str], nlp_artifacts: Any = None
    ) -> list[RecognizerResult]:
        return [
            _to_result(d, self)
            for d in self._detector.detect(text)
            if d.entity_type in entities
        ]


class FastPiiRecognizer(EntityRecognizer):
    """Our validated pattern PII detectors as one presidio recognizer."""

    ENTITIES = [*PATTERN_DETECTORS, "PHONE_NUMBER", "LOCATION"]

    def __init__(self) -> None:
        self._phone = PhoneFinder()
        super().__init__(
            supported_entities=list(self.ENTITIES), name="FastPiiRecognizer"
        )

    def load(self) -> None:  # noqa: D102
        pass

    def analyze(  # noqa: D102
        self, text: str, entities: list[str], nlp_artifacts: Any = None
    ) -> list[RecognizerResult]:
        dets: list[Detection] = []
        for etype, finder in PATTERN_DETECTORS.items():
            if etype in entities:
                dets.extend(finder(text))
        if "PHONE_NUMBER" in entities:
            dets.extend(self._phone.find(text))
        if "LOCATION" in entities:
            dets.extend(find_addresses(text))
        return [_to_result(d, self) for d in dets]


def secret_recognizers(
    config: SecretConfig | None = None, entity_types: Iterable[str] | None = None
) -> list[EntityRecognizer]:
    """All secret recognizers (token formats + keyword context) for presidio."""
    cfg = config or SecretConfig()
    wanted = set(entity_types) if entity_types is not None else set(SECRET_TYPES)
    recs: list[EntityRecognizer] = [
        TokenSecretRecognizer(rule)
        for rule in TOKEN_RULES
        if rule.entity_type in wanted and rule.name not in cfg.disabled
    ]
    if wanted & set(ContextSecretRecognizer.ENTITIES):
        recs.append(ContextSecretRecognizer(cfg))
    return recs


def presidio_fallback_recognizers(
    entity_types: Iterable[str], policy: Any
) -> list[tuple[EntityRecognizer, list[str]]]:
    """presidio's predefined pattern recognizers for types we do not detect."""
    wanted = sorted(set(entity_types))
    if not wanted:
        return []
    from presidio_analyzer import RecognizerRegistry  # noqa: PLC0415

    registry = RecognizerRegistry(supported_languages=[policy.pii.language])
    registry.load_predefined_recognizers(languages=[policy.pii.language])
    out = []
    for rec in registry.get_recognizers(
        language=policy.pii.language, entities=wanted, all_fields=False
    ):
        if isinstance(rec, PatternRecognizer):
            out.append((rec, [e for e in rec.supported_entities if e in wanted]))
    return out


def build_analyzer(policy: Any) -> Any:
    """A presidio ``AnalyzerEngine`` with our recognizers and the slim spaCy model.

    The registry holds our secret and pattern recognizers, presidio's spaCy
    recognizer, and presidio's predefined recognizers for listed types we do not
    cover. Call ``analyze(text, language="en", entities=[...])`` as usual.
    """
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry  # noqa: PLC0415
    from presidio_analyzer.nlp_engine import NlpEngineProvider  # noqa: PLC0415
    from presidio_analyzer.predefined_recognizers import (  # noqa: PLC0415
        SpacyRecognizer,
    )

    from ctxledger.pipelines.redact.engine import OWN_TYPES  # noqa: PLC0415
    from ctxledger.pipelines.redact.ner import model_location  # noqa: PLC0415

    types = {r.type for r in policy.pii.entities}

    engine = NlpEngineProvider(
        nlp_configuration={
            "nlp_engine_name": "spacy",
            "models": [
                {"lang_code": "en", "model_name": model_location(policy.pii.ner_model)}
            ],
        }
    ).create_engine()
    nlp = engine.nlp["en"]
    for name in list(nlp.pipe_names):
        if name not in ("ner",):
            nlp.disable_pipe(name)
    registry = RecognizerRegistry(supported_languages=["en"])
    cfg = SecretConfig.from_settings(policy.pii.secrets)
    for rec in secret_recognizers(cfg, types & SECRET_TYPES):
        registry.add_recognizer(rec)
    registry.add_recognizer(FastPiiRecognizer())
    registry.add_recognizer(SpacyRecognizer(supported_language="en"))
    for rec, _ in presidio_fallback_recognizers(types - OWN_TYPES, policy):
        registry.add_recognizer(rec)
    return AnalyzerEngine(
        registry=registry, nlp_engine=engine, supported_languages=["en"]
    )
