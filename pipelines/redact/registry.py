"""The entity types the detectors produce, and the policy loader jobs use.

Why here: a policy must only name what some detector can find, or a typo
(``PERSN``) silently redacts nothing (issue 29: fail closed). The registry is
the redact stage's own: our detectors' types are ``engine.OWN_TYPES`` (NER,
secret, pattern and phone types; a detector added there is accepted with no
second list to update), and a listed type none of ours produces is served by
presidio's predefined pattern recognizers (``recognizers.
presidio_fallback_recognizers``), so it is known when presidio has one for the
policy's language. presidio's analyzer (seconds to import) is asked only about
types outside ``OWN_TYPES``, so checking the default policy stays cheap.

``load_checked_policy`` is how jobs load a policy: ``schemas.policy.load_policy``
with this registry, plus the detector fingerprint (``fingerprint``) attached, so
``policy_version`` names the detector too.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import cache
from pathlib import Path

from ctxledger.pipelines.redact import engine
from ctxledger.pipelines.redact.fingerprint import detector_fingerprint, policy_models
from ctxledger.pipelines.redact.secrets import RULE_NAMES
from ctxledger.schemas.policy import Policy, load_policy


@cache
def presidio_types(language: str) -> frozenset[str]:
    """Entity types presidio's predefined pattern recognizers produce."""
    from presidio_analyzer import PatternRecognizer, RecognizerRegistry  # noqa: PLC0415

    registry = RecognizerRegistry(supported_languages=[language])
    registry.load_predefined_recognizers(languages=[language])
    return frozenset(
        entity
        for rec in registry.get_recognizers(language=language, all_fields=True)
        if isinstance(rec, PatternRecognizer)
        for entity in rec.supported_entities
    )


class RedactRegistry:
    """``schemas.policy.DetectorRegistry`` backed by the redact stage."""

    secret_rules: frozenset[str] = RULE_NAMES

    def known_entity_types(self) -> frozenset[str]:
        """Our own detectors' types (presidio's extra ones are not listed)."""
        return frozenset(engine.OWN_TYPES)

    def unknown_entity_types(
        self, names: Collection[str], language: str
    ) -> frozenset[str]:
        """The names neither our detectors nor presidio's fallback produce."""
        rest = frozenset(names) - engine.OWN_TYPES
        if not rest:
            return frozenset()
        return rest - presidio_types(language)


REGISTRY = RedactRegistry()


def load_checked_policy(path: str | Path | None = None) -> Policy:
    """The policy at ``path`` (None: the packaged default), checked against
    the registry, with the detector fingerprint attached (raises
    ``schemas.policy.PolicyError``)."""
    policy = load_policy(path, registry=REGISTRY)
    return policy.with_detector(detector_fingerprint(policy_models(policy.pii)))
