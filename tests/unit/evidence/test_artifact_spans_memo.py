"""``artifact_spans`` remembers its last answer (an output seen by several
subjects is chunked once per subject, back to back): the answer is always the
one a fresh computation gives, whatever the order of texts and policies."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxledger.pipelines.evidence.documents import _artifact_spans, artifact_spans
from ctxledger.pipelines.ingest.tokens import count_tokens
from ctxledger.schemas.policy import load_policy

POLICY = load_policy(None)
SMALL = POLICY.model_copy(
    update={
        "evidence": POLICY.evidence.model_copy(
            update={
                "chunking": POLICY.evidence.chunking.model_copy(
                    update={"max_tokens": 40, "min_tokens": 8}
                )
            }
        )
    }
)
LOG = "".join(f"step {n}: compiling module_{n}.py ok\n" for n in range(300))
TEXTS = [LOG, LOG.replace("ok", "FAILED", 3), "short output", LOG[:2000]]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TEXTS), st.booleans()), max_size=8))
def test_every_answer_is_the_fresh_one(calls):
    for text, small in calls:
        policy = SMALL if small else POLICY
        tokens = count_tokens(text)
        assert artifact_spans(text, policy, tokens) == _artifact_spans(
            text, policy, tokens
        )


def test_a_caller_changing_its_list_does_not_change_the_next_answer():
    tokens = count_tokens(LOG)
    first = artifact_spans(LOG, POLICY, tokens)
    expected = list(first)
    first.clear()
    assert artifact_spans(LOG, POLICY, tokens) == expected != []
