"""One session grouping for the ledger, memory and evidence stages
(``pipelines.ingest.grouped``): the redact stage's per-session bundles merge
into the groups the stages used to build themselves from loose records."""

from __future__ import annotations

import pickle

from ctxledger.pipelines.ingest.drafts import DraftMessage, DraftSession
from ctxledger.pipelines.ingest.grouped import (
    SessionGroup,
    SessionRecords,
    group_records,
)
from ctxledger.pipelines.ingest.normalize import SourceInfo, normalize_session


class _Same:
    def __init__(self, text: str):
        self.text = text
        self.findings = ()


def _normalized(source_hash: str, outputs: tuple[str, ...], file: str = "f.jsonl"):
    """A canonical session ``chat-1`` (the same id from every file) with one
    user turn and a tool result per output."""
    messages = [DraftMessage(role="user", content="hi", source_offset="line:1")]
    for n, output in enumerate(outputs):
        messages.append(
            DraftMessage(
                role="tool",
                tool_call_id=f"c{n}",
                tool_output=output,
                tool_status="ok",
                source_offset=f"line:{n + 2}",
            )
        )
    draft = DraftSession(
        source_format="canonical",
        external_id="chat-1",
        source_offset="line:1",
        metadata={"subject_id": "u-1"},
        messages=messages,
    )
    info = SourceInfo("acme", file, source_hash, "run_t", "p+0", "test")
    return normalize_session(draft, info, lambda fields: [_Same(t) for _, t in fields])


def _bundle(built) -> SessionRecords:
    return SessionRecords.of(
        built.session, built.messages, built.observations, built.artifacts
    )


def test_a_bundle_carries_the_outputs_its_observations_point_at():
    built = _normalized("h1", ("out one", "out two", "out one"))
    bundle = _bundle(built)
    refs = {o.artifact_ref for o in built.observations}
    assert dict(bundle.outputs).keys() == refs
    assert sorted(dict(bundle.outputs).values()) == ["out one", "out two"]
    assert bundle.session_id == built.session.session_id
    # bundles cross Beam's groupings pickled
    assert pickle.loads(pickle.dumps(bundle)) == bundle


def test_one_file_per_session_merges_to_the_bundle_itself():
    built = _normalized("h1", ("out one",))
    group = SessionGroup.merge(built.session.session_id, [_bundle(built)])
    assert group.session == built.session
    assert group.messages == tuple(built.messages)
    assert group.observations == tuple(built.observations)
    assert group.outputs == {a.artifact_id: a.content for a in built.artifacts}


def test_a_session_continued_in_another_file_merges_in_source_hash_order():
    later = _normalized("h2", ("second",), file="b.jsonl")
    earlier = _normalized("h1", ("first",), file="a.jsonl")
    session_id = earlier.session.session_id
    assert later.session.session_id == session_id  # canonical ids span files
    for parts in (
        [_bundle(later), _bundle(earlier)],
        [_bundle(earlier), _bundle(later)],
    ):
        group = SessionGroup.merge(session_id, parts)
        assert [s.source_hash for s in group.sessions] == ["h1", "h2"]
        assert group.session.source_hash == "h1"
        assert sorted(group.outputs.values()) == ["first", "second"]
        assert len(group.messages) == len(earlier.messages) + len(later.messages)
        assert len(group.observations) == 2


def test_loose_records_group_as_bundles_do():
    built = _normalized("h1", ("out one", "out two"))
    other = _normalized("h9", ("elsewhere",), file="z.jsonl")
    other_output = other.artifacts[0]
    orphan = built.messages[0].model_copy(
        update={"session_id": "ses_gone", "message_id": "msg_gone"}
    )
    groups = group_records(
        [built.session],
        [*built.messages, orphan],
        built.observations,
        [*built.artifacts, other_output],  # not pointed at: not an output
    )
    assert [g.session_id for g in groups] == [built.session.session_id, "ses_gone"]
    assert groups[0] == SessionGroup.merge(groups[0].session_id, [_bundle(built)])
    assert groups[1].session is None and groups[1].messages == (orphan,)
    stray = SessionRecords(None, (orphan,))
    assert stray.session_id == "ses_gone"
    assert SessionGroup.merge("ses_gone", [stray]) == groups[1]
