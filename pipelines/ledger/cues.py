"""Cue patterns of the summary sections: which sentence goes where.

Lexical rules over redacted, natural-language sentences (see ``text``): a goal
statement, a decision or a rejection with its why, an approval asked or granted,
a next step, a standing rule, an assistant's finding or failed attempt, a plan
(not a finding), a pleasantry. One module so a reviewer sees every cue at once.
"""

from __future__ import annotations

import re

GREETING = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|good (?:morning|afternoon|evening))\b", re.I
)
GOAL = re.compile(
    r"\b(?:the goal is|our goal|my goal|goal:|objective:|the task is|task:|"
    r"i want you to|i need you to|please (?:fix|implement|add|make|build|write|"
    r"update|investigate|find))\b",
    re.IGNORECASE,
)
#: A user sentence asking for something: a question, a need, a request, or
#: an imperative ("Book me a flight to Seattle on May 20.").
ASK = re.compile(
    r"\?[\s\"')\]]*$|\b(?:i need|i'd like|i would like|i want|i wish to|"
    r"i'm looking|i am looking|looking to|i'm trying|i am trying|i was hoping|"
    r"i'm hoping|i am hoping|we need|we want|we'd like|can you|could you|"
    r"would you|will you|please|help me|need (?:some )?help|assist)\b|"
    r"^\W*(?:(?:now|also|then|and|so|ok|okay|next)\W+)*(?:book|cancel|change|"
    r"add|remove|create|make|fix|find|show|tell|give|send|set|update|delete|"
    r"open|check|get|write|run|implement|schedule|remind|move|list|explain|"
    r"modify|upgrade|downgrade|refund|reserve|search|look up|transfer|buy|"
    r"order|pay|calculate|convert|translate|summari[sz]e|install|build|deploy|"
    r"investigate|debug|review|reproduce|rename|refactor|test)\b",
    re.IGNORECASE,
)
#: A user closing the conversation ("No, thank you.", "That's all for now."):
#: nothing is asked, so it is neither the goal nor the latest request.
CLOSING = re.compile(
    r"^\W*(?:(?:no|nope|ok|okay|great|perfect|alright|all right|yes|sure),?\s+)?"
    r"(?:thanks?|thank you|that's all|that is all|that's it|that will be all|"
    r"nothing else|i'm all set|i'm good|goodbye|bye)\b",
    re.IGNORECASE,
)
#: A user saying who they are ("I'm Dana Whitfield", "My email is ..."): a
#: pinned fact, never the goal.
IDENTITY = re.compile(
    r"^\W*(?i:(?:sure|yes|ok|okay|certainly|of course|well|so),?\s+)?"
    r"(?:(?i:i'm|i am|this is|my name is|name's)\s+(?:<[A-Z_]+:[0-9a-f]+>|"
    r"[A-Z][\w'-]*)(?:\s+[A-Z][\w'-]*)*\W*$|(?i:my (?:full |first |last |user |"
    r"account |customer |employee |member(?:ship)? )?(?:name|e-?mail(?: address)?|"
    r"user ?(?:id|name)|username|login|phone(?: number)?|number|account(?: number| "
    r"id)?|id|address|password|date of birth|dob|membership(?: number)?|"
    r"customer number)\b[^?]{0,80}?\b(?:is|are)\b))"
)
#: An assistant taking on a task for the user ("I'll open ticket T-9921 for
#: the duplicate charge"), not a step of its own search ("I'll check").
TAKES_ON = re.compile(
    r"^\W*(?:i'll|i will|i am going to|i'm going to|we'll|we will)\s+"
    r"(?!(?:now |first |then |also )?(?:look|check|search|see|try|start|begin|"
    r"need|review|examine|verify|investigate|take a look|get back|help)\b)",
    re.IGNORECASE,
)
REJECT = re.compile(
    r"\b(?:decided against|rejected|ruled out|rule out|instead of|rather than|"
    r"abandon(?:ed)?|discarded|not going with|won't go with|will not go with)\b",
    re.IGNORECASE,
)
DECISION = re.compile(
    r"\b(?:decided|decision|we will go with|going with|agreed|let's go with|"
    r"confirmed|settled on|chose|we'll use|will use|we will use)\b",
    re.IGNORECASE,
)
APPROVAL = re.compile(
    r"\b(?:pending|awaiting|awaits|await|waiting (?:for|on)|needs?|requires?|"
    r"required|requests?|requesting)\b.{0,80}?\b(?:approv\w*|sign[- ]?offs?)\b",
    re.IGNORECASE,
)
GRANTED = re.compile(
    r"\b(?:approved|signed off|sign-off (?:given|received|granted)|go ahead|"
    r"granted)\b",
    re.IGNORECASE,
)
NEXT = re.compile(
    r"\b(?:next steps?|next,|todo|to-do|follow[- ]ups?|action items?|remaining|"
    r"plan:|then i will|then we will|"
    # the session's pending chain: "we wait for CAB-5521 approval, then
    # deploy the revert, then refund A-3381", "once it is deployed, ..."
    r"(?:we|i|you) (?:still )?(?:wait|need to wait|are waiting) (?:for|on)|"
    r"once (?:it|this|that|the \w+) (?:is|has been|gets) (?:approved|deployed|"
    r"merged|released|done|signed off)|"
    r"then (?:deploy|refund|release|merge|roll (?:back|out)|notify|close|restart|"
    r"re-?run|rerun|ship|migrate|apply|revert))\b",
    re.IGNORECASE,
)
#: A request for a summary or a status: it asks for no step of the task, so
#: it does not replace the latest request under "Next steps".
META_REQUEST = re.compile(
    r"\b(?:summari[sz]e|summary|recap|where (?:we are|we stand|things stand)|"
    r"status update|catch me up|up to speed|what(?:'s| is) the status)\b",
    re.IGNORECASE,
)
#: A proposal of an option ("Could we just double the pool to 128?").
PROPOSAL = re.compile(
    r"\b(?:could we|can we|should we|shall we|what about|how about|why not|"
    r"we could|you could|alternatively|instead of|option)\b",
    re.IGNORECASE,
)
#: A rejection that names its option by a pronoun ("I rejected it").
REJECT_BY_PRONOUN = re.compile(
    r"\b(?:rejected|ruled out|decided against|discarded|abandoned|turned down|"
    r"declined|dropped)\s+(?:it|that|this|them|those|that idea|this idea|the "
    r"idea|the proposal|that option|this option)\b|\brul(?:e|ed) (?:it|that|"
    r"this) out\b",
    re.IGNORECASE,
)
#: A sentence giving a why ("because the peak is ~200", "would exceed").
REASON = re.compile(
    r"\b(?:because|since|due to|as it|would|exceeds?|exceeding|too|leaves|"
    r"only|cap|limit|peak|risk|breaks?|costs?|not enough)\b",
    re.IGNORECASE,
)
PIN = re.compile(
    r"\b(?:always|never|must|do not|don't|standing rule|rule:|from now on|"
    r"going forward|remember|make sure|keep|prefer|correction|important)\b",
    re.IGNORECASE,
)
#: Assistant sentences that state a result (findings), not a plan.
FINDING = re.compile(
    r"\b(?:found|find that|shows?|showed|shown|indicates?|indicating|suggests?|"
    r"confirms|confirmed|reveals?|revealed|because|due to|caused by|"
    r"the (?:issue|problem|bug|cause|error|root cause|output|result) (?:is|was)|"
    r"(?:is|are) (?:located|defined|declared|set|present|stored|missing)|"
    r"(?:was|were|has been|have been) (?:fixed|updated|created|removed|added|"
    r"resolved|recovered|applied|booked|cancell?ed|modified|changed|raised)|"
    r"successful(?:ly)?|succeeded|reproduced|raised|returns?|returned|"
    r"output (?:is|was|shows|changed)|changed from|worked|passe[sd]|"
    r"total (?:cost|price) is|it seems|it appears|appears to)\b",
    re.IGNORECASE,
)
#: Assistant sentences saying an attempt failed: a rejected option with its why.
FAILED = re.compile(
    r"\b(?:did not|didn't|does not work|doesn't work|doesn't seem|do not work|"
    r"could not|couldn't|unable to|cannot be|not (?:sufficient|enough|eligible|"
    r"allowed|possible|available|present|correct(?:ly)?|working|the cause)|"
    # "48 passed, 0 failed" is a test run that passed
    r"(?<!\b0 )(?<!\bnone )failed|syntax error|wrong|incorrect|typo|timed out|"
    r"no luck|"
    r"no (?:additional|new) output|multiple occurrences|not recovered)\b",
    re.IGNORECASE,
)
#: Hypotheticals and checks ("to see if it fails", "without an error").
NOT_FAILED = re.compile(
    r"\b(?:to see if|to ensure|to make sure|to check|without (?:an? )?error|"
    r"next step)\b",
    re.IGNORECASE,
)
#: A failure cue that is over ("the syntax error is resolved", "ran
#: successfully"): a finding, unless a negation says otherwise.
SUCCEEDED = re.compile(
    r"\b(?:successfully|succeeded|(?:is|are|was|were|has been|have been) "
    r"(?:now )?(?:resolved|fixed|gone)|no longer)\b",
    re.IGNORECASE,
)
NEGATED = re.compile(r"\b(?:not|never|unable|cannot|failed|no luck)\b|n't\b", re.I)
#: A user turning down what was proposed ("still above my budget", "Neither
#: of those works for me"): a rejected option, the why in the sentence.
USER_DECLINE = re.compile(
    r"\b(?:too (?:expensive|high|long|late|early|slow|much)|above my|over my|"
    r"higher than my|more than i|(?:doesn't|does not|won't|will not) work for me|"
    r"neither|rather not|(?:i|we) (?:don't|do not) want|not (?:acceptable|"
    r"what i (?:want|asked))|prefer not)\b",
    re.IGNORECASE,
)
PLAN = re.compile(
    r"^\W*(?:let's|let me|let us|i'll|i will|we'll|we will|we should|i should|"
    r"now,? (?:let's|i'll|we)|next,|first,|then,|to (?:do|fix|find|verify|check)|"
    r"please)\b",
    re.IGNORECASE,
)
#: An assistant asking the user to confirm before it acts (pending approval).
CONFIRM_ASK = re.compile(
    r"\b(?:please confirm|confirm (?:if|whether|that|the following|these|this)|"
    r"once you confirm|do you confirm|can you confirm|could you confirm|"
    r"(?:would|do) you (?:like|want) (?:me )?to proceed|shall i proceed|"
    r"should i proceed|(?:reply|answer) (?:yes|with yes))\b",
    re.IGNORECASE,
)
PLEASANTRY = re.compile(
    r"^\W*(?:i can help|i'd be happy|i would be happy|of course|sure|certainly|"
    r"no worries|no problem|great|thank(?:s| you)|you're welcome|understood)\b",
    re.IGNORECASE,
)
MARKDOWN = re.compile(r"[*_`]{1,3}")
#: Any cue a section looks for (one search instead of five on most sentences).
ANY_CUE = re.compile(
    "|".join(f"(?:{p.pattern})" for p in (REJECT, DECISION, APPROVAL, GRANTED, NEXT)),
    re.IGNORECASE,
)
