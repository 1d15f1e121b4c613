"""Generated agent-like sessions for the bench when ``../shared/corpora`` is absent.

Deterministic (seeded) mixes of chat prose, JSON tool output, logs, code and a few
planted PII values and fake secrets, sized like real agent messages (~400 bytes).
"""

from __future__ import annotations

import json
import random

from eval.corpora import SessionItems

_PROSE = [
    "Thanks! I'll check the booking for {name} and get back to you shortly.",
    "The tests pass now. I changed the parser so that empty lines are skipped.",
    "Could you confirm the shipping address {addr} before I place the order?",
    "I looked at the stack trace: the error comes from the retry loop in client.py.",
    "Please email {email} or call {phone} if the problem persists.",
]
_LOG = (
    "2024-05-15 15:00:0{n} INFO worker started pid={n}234\n"
    "2024-05-15 15:00:0{n} WARN retrying request id=ab12cd{n} attempt=2\n"
)
_CODE = (
    "def handler(event):\n    token = os.environ['API_TOKEN']\n    return run(event)\n"
)
_NAMES = ["Maria Lopez", "Kenji Watanabe", "Olivia Brown", "Ahmed Hassan"]


def synthetic_sessions(n_sessions: int = 120, seed: int = 3) -> list[SessionItems]:
    """``n_sessions`` sessions of 8-14 messages each."""
    rng = random.Random(seed)
    sessions: list[SessionItems] = []
    for s in range(n_sessions):
        session: SessionItems = []
        for m in range(rng.randint(8, 14)):
            name = rng.choice(_NAMES)
            values = {
                "name": name,
                "addr": f"{rng.randint(1, 999)} Oak Street, Springfield",
                "email": f"{name.split()[0].lower()}@example.com",
                "phone": f"+1 415 555 01{rng.randint(10, 99)}",
            }
            kind = (s + m) % 4
            if kind == 0:
                session.append([("content", rng.choice(_PROSE).format(**values))])
            elif kind == 1:
                output = json.dumps(
                    {
                        "user": {
                            "first_name": name.split()[0],
                            "email": values["email"],
                        },
                        "items": list(range(rng.randint(3, 12))),
                    }
                )
                session.append(
                    [("tool_arguments", json.dumps({"id": s})), ("tool_output", output)]
                )
            elif kind == 2:
                session.append([("tool_output", _LOG.format(n=m % 10) * 3)])
            else:
                session.append([("content", "Here is the fix:\n" + _CODE)])
        sessions.append(session)
    return sessions
