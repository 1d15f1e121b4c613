"""End to end: conversation turns landed by a real nightly, searched over HTTP.

Two tenants and two subjects share names, session ids and most of their text;
a search of one subject's turns never returns another's, whatever the query.
The LoCoMo fixture (``tests/fixtures/transcripts/locomo_conv30_trimmed.json``,
snap-research/LoCoMo, CC BY-NC 4.0) lands as it is and keeps its turn ids,
speakers and session dates.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest
from test_serve import Server

from ctxledger.serving import Context
from ctxledger.serving.auth import Tokens

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "transcripts"
TOKENS = {
    "acme-support-token-1": {
        "tenant": "acme",
        "groups": ["support"],
        "subjects": ["u1", "loc"],
    },
    "globex-token-000001": {
        "tenant": "globex",
        "groups": ["support"],
        "subjects": ["u1"],
    },
}
ACME = {"Authorization": "Bearer acme-support-token-1"}
GLOBEX = {"Authorization": "Bearer globex-token-000001"}


def chat(marker: str) -> str:
    """One session of three turns; ``marker`` is the word only this copy has."""
    lines = [
        ("m1", "user", f"My favourite editor is helix and I use it for {marker}."),
        ("m2", "assistant", "Noted, helix it is."),
        ("m3", "user", "Also, the staging cluster lives in eu-west-1."),
    ]
    return "".join(
        json.dumps(
            {
                "session_id": "chat-1",
                "id": i,
                "turn": n,
                "role": role,
                "content": text,
                "created_at": f"2024-03-0{n + 1}T10:00:00Z",
            }  # fmt: skip
        )
        + "\n"
        for n, (i, role, text) in enumerate(lines)
    )


@pytest.fixture(scope="module")
def served(job_server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("turns")
    landing = tmp / "landing"
    for tenant, subject, marker in (
        ("acme", "u1", "kayaking"),
        ("acme", "u2", "woodworking"),
        ("globex", "u1", "beekeeping"),
    ):
        folder = landing / f"tenant={tenant}" / f"subject={subject}"
        folder.mkdir(parents=True)
        (folder / "chat.jsonl").write_text(chat(marker))
    folder = landing / "tenant=acme" / "subject=loc"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURES / "locomo_conv30_trimmed.json", folder / "locomo.json")
    argv = ["nightly", "--landing", str(landing), "--warehouse", str(tmp / "wh")]
    job = job_server.start(argv, tmp / "nightly.log")
    assert job.wait(timeout=300) == 0, job.output()[-3000:]
    context = Context.open(tmp / "wh", poll_s=0)
    (tmp / "tokens.json").write_text(
        json.dumps({"tokens": [{"token": t, **p} for t, p in TOKENS.items()]})
    )
    server = Server(context, Tokens.load(tmp / "tokens.json"))
    with httpx.Client(base_url=server.url, timeout=120) as client:
        yield client
    server.stop()
    context.close()


def turns(client, headers, **body):
    body = {"kinds": ["messages"], "k": 10, **body}
    answer = client.post("/search", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["hits"] == []
    return answer.json()["turns"]


def test_a_subject_sees_only_its_own_turns(served):
    for query in ("woodworking", "beekeeping", "kayaking", "favourite editor"):
        found = turns(served, ACME, query=query, subject_id="u1")
        assert found, query
        assert {t["tenant_id"] for t in found} == {"acme"}
        assert {t["subject_id"] for t in found} == {"u1"}
        texts = " ".join(t["text"] for t in found)
        assert "woodworking" not in texts and "beekeeping" not in texts
    mine = turns(served, GLOBEX, query="beekeeping", subject_id="u1")
    assert mine[0]["source_id"] == "m1" and "beekeeping" in mine[0]["text"]
    assert {t["tenant_id"] for t in mine} == {"globex"}


def test_hits_name_their_turn(served):
    top = turns(served, ACME, query="which editor do I like", subject_id="u1")[0]
    assert top["source_id"] == "m1" and top["turn"] == 0
    assert top["message_id"].startswith("msg_") and top["session_id"]
    assert top["role"] == "user" and top["created_at"].startswith("2024-03-01")
    assert top["score"] > 0 and top["bm25"] > 0 and top["cosine"] is not None


def test_scope_is_refused_rather_than_widened(served):
    body = {"query": "editor", "kinds": ["messages"], "subject_id": "u2"}
    assert served.post("/search", json=body, headers=ACME).status_code == 403
    body = {"query": "editor", "kinds": ["messages"], "tenant_id": "acme"}
    assert served.post("/search", json=body, headers=GLOBEX).status_code == 403
    body = {"query": "editor", "kinds": ["messages"]}
    assert served.post("/search", json=body, headers=ACME).status_code == 422
    body = {"query": "editor", "kinds": ["chats"], "subject_id": "u1"}
    assert served.post("/search", json=body, headers=ACME).status_code == 422


def test_locomo_turns_keep_ids_speakers_dates_and_context(served):
    found = turns(
        served, ACME, query="When did Jon lose his job as a banker?",
        subject_id="loc", k=3, context_turns=1,
    )  # fmt: skip
    top = found[0]
    assert top["source_id"] == "D1:2"
    assert top["created_at"].startswith("2023-01-20T16:04")
    assert [c["source_id"] for c in top["context"]] == ["D1:1", "D1:3"]
    # speakers and names are pseudonymised like the text; nothing raw comes back
    blob = json.dumps(found)
    assert "Gina" not in blob
    gina = top["context"][0]
    assert gina["speaker"].startswith("<PERSON:")
    assert "Hey <PERSON:" in gina["text"]


def test_every_speaker_is_pseudonymised(served):
    """A short first name the detector never finds alone ("Jon") takes the
    pseudonym the session's longer mention of it got (one value, one
    placeholder in a session)."""
    found = turns(served, ACME, query="job banker", subject_id="loc")
    assert all(t["speaker"].startswith("<PERSON:") for t in found)


def test_time_filters_apply_before_the_top_k(served):
    early = turns(
        served, ACME, query="job", subject_id="loc", until="2023-01-21T00:00:00Z"
    )
    assert early and {t["source_id"].split(":")[0] for t in early} == {"D1"}
    late = turns(
        served, ACME, query="job", subject_id="loc", since="2023-01-25T00:00:00Z"
    )
    assert late and {t["source_id"].split(":")[0] for t in late} == {"D2"}
