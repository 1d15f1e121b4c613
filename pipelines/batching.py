"""Forward passes formed by word-piece budget (no torch, no Beam here).

Kept apart from ``pipelines.models`` (which re-exports both names) so that the
model modules it loads lazily (``pipelines.minilm``, ``pipelines.onnx_minilm``)
can use the grouping without importing their own loader back.
"""

from __future__ import annotations

from collections.abc import Sequence

#: Word pieces one MiniLM forward pass may hold, padding included (texts in
#: the batch x the longest of them). Measured on the 1,075 tool-artifact
#: texts of corpora section A (bf16, 1 thread): fixed batches of up to 64
#: texts padded 263k word pieces for 143k real ones (46% padding) and cost
#: 46 CPU-s; batches of one length class under 1,024 word pieces cost 29
#: CPU-s (512: the same; 2,048: 33; 4,096: 41; the attention is quadratic in
#: the padded length, so long batches lose what batching wins).
TOKEN_BUDGET = 1024

#: Texts per model call of the stages and jobs that embed many texts (the
#: nightly's evidence and memory vectors, ``ctxledger embed``). A call sorts
#: its texts by length into passes of one length class (``token_batches``),
#: so the more texts a call holds the less its passes pad: the evidence stage
#: of corpora section A (1,071 texts) took 11.4-11.6 s in calls of 64 texts
#: and 10.0 s in calls of up to 1,024. Each pass still holds at most the
#: policy's ``max_batch_size`` texts; a call's vectors are held only until its
#: chunks are emitted (1,024 x 384 floats: 1.5 MB).
CALL_TEXTS = 1024


def token_batches(
    lengths: Sequence[int], budget: int = TOKEN_BUDGET, max_count: int = 0
) -> list[list[int]]:
    """Indexes of ``lengths`` grouped for forward passes, longest first.

    Each group's padded size (its size x its longest length) stays within
    ``budget`` (a text longer than the budget goes alone) and it holds at most
    ``max_count`` texts (0: no count limit). Sorting first puts texts of one
    length class together, so a batch pads little; sentence-transformers sorts
    only within one ``encode`` call and pads a call's fixed-count batches to
    their longest text.
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    groups: list[list[int]] = []
    current: list[int] = []
    for index in order:
        full = max_count and len(current) >= max_count
        if current and (full or (len(current) + 1) * lengths[current[0]] > budget):
            groups.append(current)
            current = []
        current.append(index)
    if current:
        groups.append(current)
    return groups
