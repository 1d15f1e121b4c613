"""Stable reason codes for dead letters, and safe messages built from errors.

Messages must never quote the payload: pydantic errors are rendered from their
location and error type only (``include_input=False`` semantics), JSON errors from
their position only.
"""

from __future__ import annotations

from collections.abc import Collection

from pydantic import ValidationError

MALFORMED_JSON = "malformed_json"
INVALID_UTF8 = "invalid_utf8"
MISSING_FIELD = "missing_field"
WRONG_TYPE = "wrong_type"
UNKNOWN_ROLE = "unknown_role"
OVERSIZE = "oversize_record"
EMPTY_FILE = "empty_file"
UNKNOWN_FORMAT = "unknown_format"
FILE_CHANGED = "file_changed_during_run"
FILE_UNREADABLE = "file_unreadable"
INVALID_RECORD = "invalid_record"
REDACTION_FAILED = "redaction_failed"
NO_MESSAGES = "no_messages"
DUPLICATE_KEY = "duplicate_key"
INVALID_TEXT = "invalid_text"
#: A line of a session id that several subjects share in one file, naming none.
AMBIGUOUS_SUBJECT = "ambiguous_subject"
#: Landing entries that are never read (``pipelines.ingest.landing.check_entry``).
OUTSIDE_LANDING = "outside_landing"
NOT_REGULAR_FILE = "not_regular_file"
BROKEN_SYMLINK = "broken_symlink"
#: A symlink whose target lies under another ``tenant=``/``subject=`` folder
#: than the link itself: identity comes from where the bytes really are.
CROSS_SCOPE_LINK = "cross_scope_link"

ALL = {
    MALFORMED_JSON,
    INVALID_UTF8,
    MISSING_FIELD,
    WRONG_TYPE,
    UNKNOWN_ROLE,
    OVERSIZE,
    EMPTY_FILE,
    UNKNOWN_FORMAT,
    FILE_CHANGED,
    FILE_UNREADABLE,
    INVALID_RECORD,
    REDACTION_FAILED,
    NO_MESSAGES,
    DUPLICATE_KEY,
    INVALID_TEXT,
    AMBIGUOUS_SUBJECT,
    OUTSIDE_LANDING,
    NOT_REGULAR_FILE,
    BROKEN_SYMLINK,
    CROSS_SCOPE_LINK,
}


def from_validation_error(
    exc: ValidationError, fields: Collection[str] | None = None
) -> tuple[str, str]:
    """Reason code and a payload-free message for a pydantic validation error.

    The location names the failing field. A location part can come from the data
    itself (an unknown key, a key inside a free-form mapping), so only list
    indexes and the names in ``fields`` (the model's own field names) are written;
    any other part is written as ``*``. Without ``fields`` every name is kept
    except the key of an ``extra_forbidden`` error, which is always the data's.
    """
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0] if errors else {"type": "invalid", "loc": ()}
    kind = first.get("type", "invalid")
    parts = list(first.get("loc", ()))
    if kind == "extra_forbidden" and parts:
        parts[-1] = "*"
    loc = (
        ".".join(
            str(p)
            if isinstance(p, int) or fields is None or p in fields or p == "*"
            else "*"
            for p in parts
        )
        or "<record>"
    )
    if kind == "missing":
        code = MISSING_FIELD
    elif kind == "literal_error" and loc.endswith("role"):
        code = UNKNOWN_ROLE
    elif kind.endswith("_type") or kind.endswith("_parsing"):
        code = WRONG_TYPE
    else:
        code = INVALID_RECORD
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return code, f"{kind} at {loc}{more}"
