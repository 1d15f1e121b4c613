"""Stable reason codes for dead letters, and safe messages built from errors.

Messages must never quote the payload: pydantic errors are rendered from their
location and error type only (``include_input=False`` semantics), JSON errors from
their position only.
"""

from __future__ import annotations

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
}


def from_validation_error(exc: ValidationError) -> tuple[str, str]:
    """Reason code and a payload-free message for a pydantic validation error."""
    errors = exc.errors(include_input=False, include_url=False, include_context=False)
    first = errors[0] if errors else {"type": "invalid", "loc": ()}
    loc = ".".join(str(p) for p in first.get("loc", ())) or "<record>"
    kind = first.get("type", "invalid")
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
