"""The redaction engine: detect PII and secrets, then pseudonymise them.

``Redactor`` is what the redact stage's DoFn holds. It is cheap to build and safe to
pickle (Beam ships it to workers); ``setup()`` loads spaCy and presidio once per
worker and ``__getstate__`` never carries them.

Per batch of ``(field, text)`` items:

0. Each text is detected on its decoded view (``decode``: JSON ``\\uXXXX``
   escapes, HTML entities, percent-encoding); detections are mapped back onto
   the raw text, which is what gets replaced (JSON stays JSON).
1. Fast path on every text: values under secret-bearing keys (``fieldkeys``),
   passports, national ids and birth dates (``identifiers``), secret rules
   (``secrets``), pattern PII (``patterns``), JSON key rules
   (``"first_name": "Mia"``). Each detector first checks a literal or a cheap
   regex, so most texts pay for a few substring tests only.
2. NER on prose only: ``textkind.nl_spans`` picks natural-language spans (not logs,
   code, JSON syntax), ``ner.candidate_windows`` keeps the neighbourhood of
   capitalised words, and the whole batch goes through one ``nlp.pipe``. Cue
   rules run on the same prose spans: ``names`` (titles, "my name is", lower-case
   given names) and ``places`` ("grew up in X", "Where: X"); the name line above
   a postal address comes with the address (``places.recipient_name``). NER
   ORG spans are relabelled when they are names (``names.relabel_org``) or the
   town after ``at <employer> in`` (``places.org_place``).
3. Filter by the policy's per-type thresholds, drop anything overlapping one of our
   own placeholders, then add every other occurrence of a kept value (and of
   each word of a kept name: "Maria Garcia ... Maria said") with
   ``spans.repeated_values`` (issue 11: a name twice in a sentence was replaced
   once) (so redacting twice is a no-op), resolve overlaps (secrets,
   then score, then length).
3b. Across the batch (a session's fields): every detected value is replaced
   wherever it occurs verbatim in the batch (``session.session_repeats``).
4. presidio's ``AnonymizerEngine`` applies the policy's operators; its result items
   give the placeholder spans that become ``PiiFinding`` records.

Entity types the policy lists that none of our detectors produce (``US_PASSPORT``,
``MAC_ADDRESS``...) are served by presidio's own predefined pattern recognizers.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxledger.pipelines.redact import fieldkeys, identifiers, technical, textkind
from ctxledger.pipelines.redact.decode import DecodedView, decode_value, decoded_view
from ctxledger.pipelines.redact.names import find_names, relabel_org
from ctxledger.pipelines.redact.ner import (
    NerJob,
    NerRunner,
    candidate_windows,
    chunk_span,
)
from ctxledger.pipelines.redact.offline import ensure_offline_tldextract
from ctxledger.pipelines.redact.patterns import (
    PATTERN_DETECTORS,
    PhoneFinder,
    find_addresses,
)
from ctxledger.pipelines.redact.places import (
    adjacent_postcodes,
    find_places,
    military_addresses,
    org_place,
    person_over_ner_place,
    person_place,
    recipient_name,
)
from ctxledger.pipelines.redact.pseudonym import Pseudonymizer, person_aliases
from ctxledger.pipelines.redact.scripts import foreign_script_names
from ctxledger.pipelines.redact.secrets import RULE_NAMES, SecretConfig, SecretDetector
from ctxledger.pipelines.redact.session import session_repeats
from ctxledger.pipelines.redact.spans import (
    SECRET_TYPES,
    Detection,
    drop_overlapping,
    placeholder_spans,
    repeated_values,
    resolve_overlaps,
)
from ctxledger.schemas.policy import Policy
from ctxledger.schemas.transcript import PiiFinding

#: Entity types NER can produce.
NER_TYPES = frozenset({"PERSON", "LOCATION", "NRP", "ORGANIZATION", "DATE_TIME"})
#: Entity types our own detectors produce (anything else goes to presidio's).
OWN_TYPES = (
    NER_TYPES
    | SECRET_TYPES
    | frozenset(PATTERN_DETECTORS)
    | {"PHONE_NUMBER"}
    | identifiers.IDENTIFIER_TYPES
)

_PSEUDONYM_OPERATOR = "ctxledger_pseudonym"
_MASK_OPERATOR = "ctxledger_mask"
_NAME_VALUE = re.compile(r"^[^\W\d_][\w'’.\- ]{0,78}$")


@dataclass(frozen=True)
class Redaction:
    """One redacted text and the findings (placeholder spans in ``text``)."""

    text: str
    findings: list[PiiFinding] = field(default_factory=list)


def _json_value_ok(entity_type: str, value: str) -> bool:
    """Sanity check of a value taken by JSON key alone."""
    value = value.strip()
    if not value or len(value) > 200 or value.lower() in ("null", "none", "n/a", ""):
        return False
    if entity_type == "PERSON":
        return bool(_NAME_VALUE.match(value)) and len(value.split()) <= 6
    if entity_type == "LOCATION":
        if "://" in value or value.startswith("0x"):
            return False
        return (
            any(ch.isalnum() for ch in value)
            and not re.fullmatch(r"[\d.:]+|[0-9a-fA-F:]+", value)
            or re.fullmatch(r"\d{4,6}(?:-\d{4})?", value) is not None
        )
    if entity_type == "EMAIL_ADDRESS":
        return "@" in value
    if entity_type == "PHONE_NUMBER":
        return sum(ch.isdigit() for ch in value) >= 7
    if entity_type in SECRET_TYPES:
        return len(value) >= 4 and not value.startswith(("<", "${", "{{", "****"))
    return True


class _Loaded:
    """Everything ``setup()`` builds; never pickled.

    The heavy parts load on first use, so a run that has no prose to run NER
    on, or nothing to replace, never pays for them (issue 14: start-up): the
    spaCy model when ``NerRunner.detect`` first gets text, presidio's
    anonymizer (``anonymizer``) on the first detection. presidio's analyzer
    (transformers, torch) is imported only for a policy that asks for its
    fallback recognizers (``pipelines.redact.loading``).
    """

    def __init__(self, redactor: Redactor) -> None:
        policy = redactor.policy
        wanted = redactor.entity_types
        ensure_offline_tldextract()
        self.ner: NerRunner | None = None
        ner_types = wanted & NER_TYPES
        if ner_types:
            self.ner = NerRunner(
                policy.pii.ner_model,
                ner_types,
                score=policy.pii.ner_score,
                min_chars=policy.pii.ner_min_chars,
            )
        self._anonymizer: Any = None
        self.fallback: list = []
        if wanted - OWN_TYPES:
            from ctxledger.pipelines.redact.recognizers import (  # noqa: PLC0415
                presidio_fallback_recognizers,
            )

            self.fallback = presidio_fallback_recognizers(wanted - OWN_TYPES, policy)
        self.phone = PhoneFinder()
        if "PHONE_NUMBER" in wanted:
            self.phone.warm()
        from ctxledger.pipelines.redact.offline import tld_extractor  # noqa: PLC0415

        tld_extractor()  # load the suffix snapshot now, not on the first e-mail
        if wanted & {"PERSON", "LOCATION"}:
            _warm_lexicons()

    @property
    def anonymizer(self) -> Any:
        """presidio's ``AnonymizerEngine`` with our operators, built on first use."""
        with _ANONYMIZER_LOCK:
            if self._anonymizer is None:
                from ctxledger.pipelines.redact.loading import import_anonymizer  # noqa: PLC0415

                import_anonymizer()  # without presidio's analyzer
                from presidio_anonymizer import AnonymizerEngine  # noqa: PLC0415

                from ctxledger.pipelines.redact.operators import (  # noqa: PLC0415
                    MaskOperator,
                    PseudonymOperator,
                )

                engine = AnonymizerEngine()
                engine.add_anonymizer(PseudonymOperator)
                engine.add_anonymizer(MaskOperator)
                self._anonymizer = engine
            return self._anonymizer


_ANONYMIZER_LOCK = threading.Lock()


class Redactor:
    """Policy-driven PII and secret redaction with keyed per-tenant pseudonyms."""

    def __init__(
        self,
        policy: Policy,
        key: bytes,
        *,
        cache_size: int = 2048,
        cache_max_chars: int = 256 * 1024,
    ) -> None:
        self.policy = policy
        self._pseudonymizer = Pseudonymizer(key, policy.pseudonym_hex_length)
        self.cache_size = cache_size
        self.cache_max_chars = cache_max_chars
        rules = {r.type: r for r in policy.pii.entities}
        self._rules = rules
        self.entity_types = frozenset(rules)
        secrets_cfg = policy.pii.secrets
        unknown = set(secrets_cfg.recognizers) - RULE_NAMES
        if unknown:
            raise ValueError(f"unknown secret recognizers in policy: {sorted(unknown)}")
        secret_types = (
            self.entity_types & SECRET_TYPES if secrets_cfg.enabled else set()
        )
        self._secrets = (
            SecretDetector(SecretConfig.from_settings(secrets_cfg), secret_types)
            if secret_types
            else None
        )
        self._json_keys = {
            k.lower(): v for k, v in policy.pii.json_keys.items() if v in rules
        }
        self._json_key_set = frozenset(self._json_keys)
        #: Values under secret-bearing keys (``"pin": "4829"``, ``apiKey``)
        #: are always redacted (issue 29): the code's list plus the policy's.
        self._secret_keys = (
            fieldkeys.SecretKeys(policy.pii.secret_keys)
            if self.entity_types & {"SECRET", "PASSWORD"}
            else None
        )
        self._identifier_types = self.entity_types & identifiers.IDENTIFIER_TYPES
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[Detection, ...]] = OrderedDict()
        self.stats = {"items": 0, "cache_hits": 0, "ner_chars": 0, "chars": 0}

    # --------------------------------------------------------------- lifecycle
    def setup(self) -> None:
        """Build the detectors once; idempotent. spaCy and presidio's
        anonymizer load later, on first use (``_Loaded``)."""
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = _Loaded(self)

    @property
    def is_setup(self) -> bool:
        """Whether ``setup()`` has run in this process."""
        return self._loaded is not None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_loaded"] = None
        state["_lock"] = None
        state["_cache"] = OrderedDict()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------- API
    @property
    def policy_version(self) -> str:
        """The policy version stamped on everything this redactor produced."""
        return self.policy.policy_version

    def redact_text(
        self, text: str, tenant_id: str, field: str = "content"
    ) -> Redaction:
        """Redact a single text (a batch of one)."""
        return self.redact_batch([(field, text)], tenant_id)[0]

    def redact_batch(
        self, items: list[tuple[str, str]], tenant_id: str
    ) -> list[Redaction]:
        """Redact ``(field, text)`` items of one tenant; one ``Redaction`` each."""
        texts = [text or "" for _, text in items]
        detections = self.detect_batch(texts)
        # one value, one placeholder in the whole batch (a session: the redact
        # stage hands each session's fields in one call): a value found in one
        # field is replaced wherever it occurs verbatim, in it and in the others
        # ("Nate: ..." speaker prefixes, issue 29 item 6)
        detections = session_repeats(texts, detections)
        aliases = person_aliases(
            decode_value(text[d.start : d.end])
            for text, dets in zip(texts, detections, strict=True)
            for d in dets
            if d.entity_type == "PERSON"
        )
        return [
            self._apply(text, field_name, dets, tenant_id, aliases)
            for (field_name, _), text, dets in zip(
                items, texts, detections, strict=True
            )
        ]

    def prefetch(self, texts: Sequence[str]) -> int:
        """Detect, in one batch, texts that several later ``redact_batch``
        calls will ask for, so that each call finds them in the detection
        cache; returns how many were detected now.

        Why: each ``detect_batch`` runs one ``nlp.pipe`` for its NER windows,
        and one session has only a few of them: spaCy's per-call and per-batch
        work was most of the NER time. The redact stage prefetches the texts
        of a batch of sessions (``RedactSessionFn``), then redacts each
        session as before: on corpora section A the engine took 3.24-3.31 s
        instead of 3.75-3.96 s with 32 sessions a batch, with the same text
        and findings for every field. Only texts the cache will keep are
        detected (each within ``cache_max_chars``, at most ``cache_size``):
        one it would drop would be detected twice.
        """
        if self.cache_size <= 0:
            return 0
        wanted = [
            text
            for text in dict.fromkeys(texts)
            if text and len(text) <= self.cache_max_chars and text not in self._cache
        ][: self.cache_size]
        if wanted:
            self.detect_batch(wanted)
        return len(wanted)

    def detect_batch(self, texts: list[str]) -> list[tuple[Detection, ...]]:
        """Final (filtered, non-overlapping) detections in each original text."""
        self.setup()
        loaded = self._loaded
        assert loaded is not None
        out: list[tuple[Detection, ...] | None] = [None] * len(texts)
        pending: dict[str, list[int]] = {}
        raw: dict[str, list[Detection]] = {}
        jobs: list[NerJob] = []
        job_texts: list[str] = []
        job_keys: list[str] = []
        views: dict[str, DecodedView] = {}
        for i, text in enumerate(texts):
            self.stats["items"] += 1
            if not text:
                out[i] = ()
                continue
            self.stats["chars"] += len(text)
            cached = self._cache.get(text)
            if cached is not None:
                self._cache.move_to_end(text)
                self.stats["cache_hits"] += 1
                out[i] = cached
                continue
            if text in pending:
                pending[text].append(i)
                continue
            pending[text] = [i]
            # detect on the decoded text (``\\u0144``, ``&#324;``, ``%40``),
            # replace the mapped raw spans later (``pipelines.redact.decode``)
            view = decoded_view(text)
            key = text
            if view is not None:
                views[key] = view
                text = view.text
            found = raw[key] = self._fast_detect(text, loaded)
            if loaded.ner is None and not (self.entity_types & {"PERSON", "LOCATION"}):
                continue
            prose = textkind.nl_spans(text, self._json_key_set)
            if "PERSON" in self.entity_types:
                for start, end in prose:
                    found.extend(d.shifted(start) for d in find_names(text[start:end]))
            if "LOCATION" in self.entity_types:
                found.extend(military_addresses(text))  # a fixed shape: anywhere
                for start, end in prose:
                    found.extend(d.shifted(start) for d in find_places(text[start:end]))
            if loaded.ner is not None:
                for start, end in self._ner_spans(text, prose):
                    jobs.append(NerJob(len(job_texts), start, end))
                    job_texts.append(text)
                    job_keys.append(key)
        if jobs:
            self._run_ner(loaded.ner, jobs, job_texts, job_keys, raw)
        for text, positions in pending.items():
            view = views.get(text)
            if view is None:
                final = self._finalize(text, raw[text])
            else:
                final = _to_raw(view, self._finalize(view.text, raw[text]))
            self._remember(text, final)
            for i in positions:
                out[i] = final
        return [o if o is not None else () for o in out]

    # ------------------------------------------------------------- detection
    def _fast_detect(self, text: str, loaded: _Loaded) -> list[Detection]:
        wanted = self.entity_types
        dets: list[Detection] = []
        if self._secrets is not None:
            dets.extend(self._secrets.detect(text))
        for etype, finder in PATTERN_DETECTORS.items():
            if etype in wanted:
                dets.extend(finder(text))
        if "PHONE_NUMBER" in wanted:
            dets.extend(loaded.phone.find(text))
        if "LOCATION" in wanted:
            addresses = find_addresses(text)
            dets.extend(addresses)
            if "PERSON" in wanted:
                for det in addresses:
                    if det.recognizer == "pattern:address":
                        name = recipient_name(text, det.start)
                        if name is not None:
                            dets.append(name)
        if "PERSON" in wanted or "LOCATION" in wanted:
            dets.extend(foreign_script_names(text))  # "with सरल तिवारीजी in ..."
        is_json = textkind.looks_json(text)
        literals = list(textkind.json_literals(text)) if is_json else None
        if self._json_keys and is_json:
            dets.extend(self._json_key_detections(text, literals))
        if self._secret_keys is not None:
            dets.extend(
                d
                for d in self._secret_keys.detect(text, is_json, literals)
                if d.entity_type in wanted
            )
        if self._identifier_types:
            dets.extend(identifiers.detect(text, self._identifier_types))
        for recognizer, entities in loaded.fallback:
            for res in recognizer.analyze(text, entities=entities, nlp_artifacts=None):
                dets.append(
                    Detection(
                        res.start,
                        res.end,
                        res.entity_type,
                        res.score,
                        f"presidio:{recognizer.name}",
                    )
                )
        return dets

    def _json_key_detections(
        self, text: str, literals: list[tuple[str | None, int, int]] | None = None
    ) -> list[Detection]:
        out = []
        if literals is None:
            literals = list(textkind.json_literals(text))
        for key, start, end in literals:
            if key is None:
                continue
            etype = self._json_keys.get(key.lower())
            if etype is None or not _json_value_ok(etype, text[start:end]):
                continue
            out.append(Detection(start, end, etype, 0.9, f"json_key:{key.lower()}"))
        return out

    def _ner_spans(
        self, text: str, prose: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        spans = []
        max_chars = self.policy.pii.ner_chunk_chars
        for start, end in prose:
            for w_start, w_end in candidate_windows(text, start, end):
                spans.extend(chunk_span(text, w_start, w_end, max_chars))
        return spans

    def _run_ner(
        self,
        ner: NerRunner,
        jobs: list[NerJob],
        job_texts: list[str],
        job_keys: list[str],
        raw: dict[str, list[Detection]],
    ) -> None:
        pieces = [job_texts[j.item][j.start : j.end] for j in jobs]
        self.stats["ner_chars"] += sum(len(p) for p in pieces)
        for job, found in zip(jobs, ner.detect(pieces), strict=True):
            if not found:
                continue
            text = job_texts[job.item]
            target = raw[job_keys[job.item]]
            for det in found:
                det = det.shifted(job.start)
                if det.entity_type == "PERSON" and "LOCATION" in self.entity_types:
                    det = person_place(text, det) or det
                if det.entity_type == "ORGANIZATION" and "PERSON" in self.entity_types:
                    det = relabel_org(text, det) or det
                if (
                    det.entity_type == "ORGANIZATION"
                    and "LOCATION" in self.entity_types
                ):
                    det = org_place(text, det) or det
                target.append(det)

    def _finalize(self, text: str, dets: list[Detection]) -> tuple[Detection, ...]:
        rules = self._rules
        kept = [
            d
            for d in dets
            if d.entity_type in rules
            and d.score >= rules[d.entity_type].score_threshold
        ]
        if "LOCATION" in rules:
            kept = person_over_ner_place(text, kept)  # "Hi Nadia" is no place
            kept.extend(adjacent_postcodes(text, kept))
        placeholders = placeholder_spans(text)
        kept = drop_overlapping(kept, placeholders)
        kept = technical.drop_technical(text, kept)  # headings, code, terms
        kept.extend(drop_overlapping(repeated_values(text, kept), placeholders))
        return tuple(resolve_overlaps(kept))

    def _remember(self, text: str, final: tuple[Detection, ...]) -> None:
        if self.cache_size <= 0 or len(text) > self.cache_max_chars:
            return
        self._cache[text] = final
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # ------------------------------------------------------------ anonymising
    def _apply(
        self,
        text: str,
        field_name: str,
        dets: tuple[Detection, ...],
        tenant_id: str,
        aliases: dict[str, str] | None = None,
    ) -> Redaction:
        if not dets:
            return Redaction(text, [])
        loaded = self._loaded
        assert loaded is not None
        anonymizer = loaded.anonymizer  # imports presidio_anonymizer (light)
        from presidio_anonymizer.entities import (  # noqa: PLC0415
            OperatorConfig,
            RecognizerResult,
        )

        results = [
            RecognizerResult(d.entity_type, d.start, d.end, d.score) for d in dets
        ]
        operators: dict[str, Any] = {}
        for etype in {d.entity_type for d in dets}:
            rule = self._rules[etype]
            if rule.operator == "pseudonymize":
                params = {"tenant_id": tenant_id, "pseudonymizer": self._pseudonymizer}
                if etype == "PERSON":  # "Dana" after "Dana Whitfield": one person
                    # this text's own names first, then the session's: "Dana"
                    # is "Dana Whitfield" of this message even when another
                    # message of the session has a "Dana Scully"
                    params["aliases"] = {
                        **(aliases or {}),
                        **person_aliases(
                            decode_value(text[d.start : d.end])
                            for d in dets
                            if d.entity_type == etype
                        ),
                    }
                operators[etype] = OperatorConfig(_PSEUDONYM_OPERATOR, params)
            elif rule.operator == "mask":
                operators[etype] = OperatorConfig(
                    _MASK_OPERATOR,
                    {"masking_char": rule.mask_char, "keep_last": rule.keep_last},
                )
            elif rule.operator == "redact":
                operators[etype] = OperatorConfig(
                    "replace", {"new_value": f"<{etype}>"}
                )
            else:
                operators[etype] = OperatorConfig("keep", {})
        result = anonymizer.anonymize(
            text=text,
            analyzer_results=results,
            operators=operators,
            merge_entities_with_spaces=False,
        )
        items = sorted(result.items, key=lambda it: it.start)
        if len(items) != len(dets):  # presidio merged something: should not happen
            raise RuntimeError("anonymizer changed the number of entities")
        out_text = result.text
        spans = [(item.start, item.end) for item in items]
        if any(d.recognizer.startswith(fieldkeys.UNQUOTED) for d in dets):
            out_text, spans = _quote_bare_values(out_text, dets, spans)
        findings = [
            PiiFinding(
                entity_type=det.entity_type,
                field=field_name,
                start=start,
                end=end,
                score=round(float(det.score), 4),
                recognizer=det.recognizer,
            )
            for det, (start, end) in zip(dets, spans, strict=True)
        ]
        return Redaction(out_text, findings)


def _to_raw(view: DecodedView, dets: tuple[Detection, ...]) -> tuple[Detection, ...]:
    """Detections on a decoded view, moved onto the raw text it came from."""
    moved = []
    for det in dets:
        start, end = view.to_raw(det.start, det.end)
        moved.append(Detection(start, end, det.entity_type, det.score, det.recognizer))
    return tuple(resolve_overlaps(moved))


def _quote_bare_values(
    text: str, dets: tuple[Detection, ...], spans: list[tuple[int, int]]
) -> tuple[str, list[tuple[int, int]]]:
    """Quote the placeholders of JSON numbers and booleans under secret keys
    (``"pin": 7342`` -> ``"pin": "<SECRET:..>"``), so the JSON stays valid."""
    parts = []
    out_spans = []
    pos = 0
    shift = 0
    for det, (start, end) in zip(dets, spans, strict=True):
        if det.recognizer.startswith(fieldkeys.UNQUOTED):
            parts.append(text[pos:start] + '"' + text[start:end] + '"')
            pos = end
            out_spans.append((start + shift + 1, end + shift + 1))
            shift += 2
        else:
            out_spans.append((start + shift, end + shift))
    parts.append(text[pos:])
    return "".join(parts), out_spans


def _warm_lexicons() -> None:
    """Load the name bank, gazetteer (places and regions), English word
    frequencies and the ``usaddress`` model now: each loads lazily on first
    use, which would put a second or so of loading inside the first batch a
    worker redacts."""
    from ctxledger.pipelines.redact.gazetteer import (  # noqa: PLC0415
        load_places,
        load_regions,
    )
    from ctxledger.pipelines.redact.lexicon import zipf_en  # noqa: PLC0415
    from ctxledger.pipelines.redact.namebank import load_bank  # noqa: PLC0415
    from ctxledger.pipelines.redact.patterns import _us_parser  # noqa: PLC0415

    load_bank()
    load_places()
    load_regions()
    zipf_en("the")
    _us_parser()
