"""The cue prefilter in front of the MiniLM kind classifier (``cues``).

Recall is checked against the classifier itself: every sentence of a set of
memory paraphrases the pattern rules miss that the classifier accepts must pass
the prefilter (written for this test, not taken from any corpus), and so must
every memory prototype. The junk table holds lines of the kinds that made up
most of what the classifier embedded on corpora section A before: code, logs,
listings, harness instructions, chatter and one-off requests.
"""

from __future__ import annotations

import pytest

from ctxledger.pipelines.memory import cues, patterns
from ctxledger.pipelines.memory.classify import (
    DEFAULT_KIND_PROTOTYPES,
    MiniLMEncoder,
    PrototypeClassifier,
    kind_prototypes,
)
from ctxledger.schemas.policy import load_policy

SETTINGS = load_policy(None).memory

#: Memory statements no pattern rule matches; the classifier accepts some.
PARAPHRASES = (
    "Brief replies suit me best.",
    "Short bullet points work well for me.",
    "Keep your answer short",
    "Give me the summary first, then the details.",
    "Skip the pleasantries when you write to me.",
    "Reply in German if you can.",
    "Write to me in plain English, no jargon.",
    "Email is the best way to reach me.",
    "Text messages are easier for me than calls.",
    "Reach me on Slack rather than email.",
    "Ping my manager before touching production.",
    "Copy my assistant on anything about invoices.",
    "Send receipts to accounts payable.",
    "Weekends are off limits for calls.",
    "Mornings work best for meetings.",
    "I use a screen reader.",
    "I'm hard of hearing, so chat is better than a call.",
    "My pronouns are they/them.",
    "I manage the EMEA support team.",
    "I'm in charge of procurement here.",
    "I handle the payroll for our company.",
    "We are a team of twelve engineers.",
    "Our office is in Lisbon.",
    "Our fiscal year starts in April.",
    "We run everything on Kubernetes.",
    "We're on the enterprise plan.",
    "Our company uses SAP for accounting.",
    "The billing contact for our team is Maria.",
    "The outage was caused by an expired certificate.",
    "The staging cluster is shared with the data team.",
    "The build server is called hermes.",
    "Account identifier is user2",
    "The account identifier is newaccount",
    "Window seats for me, always.",
    "No calls after 6pm.",
    "Use the card ending 4242 for all renewals.",
    "All my flights should be booked in economy.",
    "Nuts make me ill, I'm allergic.",
    "English is not my first language.",
    "Spanish is my native language.",
    "Dark mode is easier on my eyes.",
    "- Brief replies suit me best.",
    "I want to be called by my first name.",
    "My manager is <PERSON:ab12cd34>.",
)
#: Paraphrases without any cue: dropped, and the classifier rejects them too
#: (``test_everything_the_classifier_accepts_passes_the_prefilter``).
NO_CUE = (
    "Metric units only, please.",
    "The primary database lives in eu-west-1.",
    "Pay with the gift card first.",
    "Formal tone, please, this goes to executives.",
)

#: Never memories, and never worth a forward pass.
JUNK = (
    "33:                version = m.group(1)",
    "Requirement already satisfied: pluggy<2.0,>=1.4 in /root/envs/lib (1.4.0)",
    "(Open file: /marshmallow-code__marshmallow/src/marshmallow/fields.py)",
    "sed -i 's/old_string/new_string/g' filename.py",
    "def division(a: float, b: float) -> float",
    "- E999 IndentationError: unexpected indent",
    "Building . -> /Users/dev/ponyc_crash",
    "env.out.print(arg)",
    "Checking if build backend supports build_editable: started",
    "Edit the sourcecode of the repo to resolve the issue.",
    "Solve the challenge, executing any commands you need.",
    "I appreciate that, but I'm not sure.",
    "I understand, but I'm really hoping for a full refund.",
    "I see, that's unfortunate.",
    "I'd like to change my flight to a later one.",
    "I'm looking to book a flight from Atlanta to Boston.",
    "Actually, I would like to get a refund for it.",
    "As a motivating example",
    "Some data: 12345",
    "Try to replicate the bug that the issue discusses.",
)


@pytest.mark.parametrize("text", PARAPHRASES)
def test_paraphrases_pass_and_no_rule_takes_them(text):
    assert cues.worth_classifying(text), text


@pytest.mark.parametrize("text", JUNK)
def test_code_logs_chatter_and_requests_never_reach_the_model(text):
    assert not cues.worth_classifying(text), text


def test_every_memory_prototype_passes():
    for kind, texts in DEFAULT_KIND_PROTOTYPES.items():
        if kind == "other":
            continue
        for text in texts:
            assert cues.worth_classifying(text), (kind, text)


def test_placeholders_are_values_not_code():
    assert not cues.looks_like_code("My manager is <PERSON:ab12cd34>.")
    assert cues.looks_like_code("if x == <PERSON:ab12cd34>: return")


def test_everything_the_classifier_accepts_passes_the_prefilter():
    """Measured recall of the prefilter against the classifier alone: 1.0 on
    the paraphrases (15 of the 48 are accepted by the classifier today)."""
    classifier = PrototypeClassifier(
        MiniLMEncoder().load(),
        kind_prototypes(SETTINGS),
        SETTINGS.kind_threshold,
        SETTINGS.kind_margin,
        reject="other",
    )
    texts = PARAPHRASES + NO_CUE
    unmatched = [t for t in texts if patterns.match_user_sentence(t) is None]
    accepted = [
        t
        for t, label in zip(unmatched, classifier.classify(unmatched), strict=True)
        if label is not None
    ]
    assert len(accepted) >= 10  # the check means something
    assert [t for t in accepted if not cues.worth_classifying(t)] == []
