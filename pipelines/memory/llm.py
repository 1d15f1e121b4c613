"""Optional extractor over an OpenAI-compatible chat-completions endpoint.

Off by default; ``ctxledger nightly --llm-endpoint URL`` turns it on, next to the
rule extractor (same ``Extractor`` interface). Only redacted message text is
sent. The model may only *point at* statements: every memory it returns must be
a verbatim substring of the message, or it is rejected (``unverified_span``), so
a model's paraphrase or guess is never stored as something the user said. What
it finds in assistant text is ``model_inferred`` (a hypothesis), never a fact.

Errors: a network failure or an HTTP 5xx/429 raises ``TransientError`` (the
runner retries the bundle); a reply that is not the JSON asked for is terminal
for that message (a dead letter). The API key, if any, comes from the
environment variable named by ``api_key_env`` and is never stored.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any

from ctxledger.pipelines.memory.extract import (
    EXTRACTOR_VERSION,
    Draft,
    SessionContext,
    TransientError,
    message_provenance,
)
from ctxledger.pipelines.memory.patterns import normalize_slot
from ctxledger.schemas import Message
from ctxledger.schemas.memory import MEMORY_KINDS

DEFAULT_MODEL = "gpt-4o-mini"
API_KEY_ENV = "CTXLEDGER_LLM_API_KEY"

SYSTEM_PROMPT = """You extract durable memories about the user from ONE chat message.
A memory is a standing rule the user sets, a preference, an identity fact about
the user, or a fact the user states. Return only JSON:
{"memories": [{"text": "<exact substring of the message>",
               "kind": "rule|preference|identity|fact",
               "slot": "<short snake_case key or null>",
               "value": "<value or null>"}]}
Copy "text" character for character from the message. Return {"memories": []}
when there is none. Placeholders like <PERSON:ab12cd34> are redacted values."""


class LlmExtractor:
    """Memories from an OpenAI-compatible ``/chat/completions`` endpoint."""

    name = "llm"

    def __init__(
        self,
        endpoint: str,
        model: str = DEFAULT_MODEL,
        api_key_env: str = API_KEY_ENV,
        timeout_s: float = 60.0,
    ):
        self.endpoint = endpoint.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.version = f"llm-{EXTRACTOR_VERSION}:{model}"

    @property
    def url(self) -> str:
        if self.endpoint.endswith("/chat/completions"):
            return self.endpoint
        return f"{self.endpoint}/chat/completions"

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(payload).encode("utf-8"), headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                raise TransientError(f"LLM endpoint answered HTTP {exc.code}") from None
            raise ValueError(f"LLM endpoint answered HTTP {exc.code}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            raise TransientError(
                f"LLM endpoint unreachable: {type(exc).__name__}"
            ) from None

    def _ask(self, message: Message) -> list[dict[str, Any]]:
        reply = self._post(
            {
                "model": self.model,
                "temperature": 0,
                "response_format": {"type": "json_object"},
                "messages": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {
                        "role": "user",
                        "content": f"role: {message.role}\nmessage:\n{message.content}",
                    },
                ],
            }
        )
        try:
            content = reply["choices"][0]["message"]["content"]
            items = json.loads(content)["memories"]
        except (KeyError, IndexError, TypeError, ValueError):
            raise ValueError("LLM reply is not the requested JSON") from None
        if not isinstance(items, list):
            raise ValueError("LLM reply is not the requested JSON")
        return [item for item in items if isinstance(item, dict)]

    def drafts(self, ctx: SessionContext, message: Message) -> list[Draft]:
        if message.role not in ("user", "assistant") or not message.content.strip():
            return []
        source = "user_stated" if message.role == "user" else "model_inferred"
        out = []
        for index, item in enumerate(self._ask(message)):
            text = item.get("text")
            kind = item.get("kind")
            if not isinstance(text, str) or not text.strip():
                continue
            if kind not in MEMORY_KINDS or kind == "account_state":
                kind = "fact"
            slot = item.get("slot")
            value = item.get("value")
            slot = normalize_slot(slot) if isinstance(slot, str) and slot else None
            value = str(value) if isinstance(value, str | int | float) else None
            start = message.content.find(text.strip())
            verified = start >= 0
            end = start + len(text.strip()) if verified else None
            out.append(
                Draft(
                    message,
                    kind,
                    source,
                    text.strip() if verified else "",
                    slot,
                    value,
                    0.5 if source == "model_inferred" else 0.8,
                    f"llm:{self.model}",
                    message_provenance(ctx, message, start, end)
                    if verified
                    else message_provenance(ctx, message, None, None).model_copy(
                        update={"json_key": f"llm_item:{index}"}
                    ),
                    reject_reason=None if verified else "unverified_span",
                    version=self.version,
                )
            )
        return out
