"""Section items: near-duplicates, caps and the item factory.

Every cap keeps the earliest and/or the latest items, so merging window by
window and building from raw agree.
"""

from __future__ import annotations

from collections.abc import Callable

from ctxledger.pipelines.ledger.text import content_words
from ctxledger.schemas.ledger import SectionItem
from ctxledger.schemas.transcript import Message

SIMILAR = 0.6
#: Where a finding's source note starts (``citations``).
SOURCE_PREFIX = " [source: "
#: Between a lead-in ("here are the flights:") and the list it announces.
LIST_SEP = " » "


def similar(a: str, b: str) -> bool:
    """Near-duplicates: most content words of the shorter one are in the other."""
    # A finding's source note and a lead-in's list are not what it says.
    a = a.split(SOURCE_PREFIX, 1)[0].split(LIST_SEP, 1)[0]
    b = b.split(SOURCE_PREFIX, 1)[0].split(LIST_SEP, 1)[0]
    wa, wb = content_words(a), content_words(b)
    if min(len(wa), len(wb)) < 3:
        return a.strip().lower() == b.strip().lower()
    return len(wa & wb) / min(len(wa), len(wb)) >= SIMILAR


def add_unique(items: list[SectionItem], item: SectionItem) -> None:
    if not any(similar(item.text, old.text) for old in items):
        items.append(item)


def keep_earliest(items: list, limit: int) -> list:
    return items[:limit]


def keep_latest(items: list, limit: int) -> list:
    return items[-limit:] if len(items) > limit else items


def keep_ends(items: list, limit: int) -> list:
    if len(items) <= limit:
        return items
    head = limit // 2
    return items[:head] + items[len(items) - (limit - head) :]


def replace_latest(
    items: list[SectionItem], prefix: str, new: SectionItem | None
) -> list[SectionItem]:
    if new is None:
        return items
    kept = [i for i in items if not i.text.startswith(prefix)]
    return [*kept, new] if new.text else kept


def item_factory(message: Message) -> Callable[[str], SectionItem]:
    def make(text: str) -> SectionItem:
        return SectionItem(
            text=text, turn=message.turn, source_message_id=message.message_id
        )

    return make
