"""Property: a planted e-mail or secret never survives, and spans stay valid."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ALPHABET = st.characters(
    codec="utf-8", categories=("L", "N", "P", "Zs"), exclude_characters="<>@"
)
SURROUND = st.text(ALPHABET, max_size=200)
LOCAL = st.from_regex(r"[a-z][a-z0-9]{2,10}(?:\.[a-z]{2,8})?", fullmatch=True)
DOMAIN = st.sampled_from(["example.com", "mail.example.org", "corp.example.co.uk"])
TOKEN_BODY = st.from_regex(r"[A-Za-z0-9]{36}", fullmatch=True).filter(
    lambda s: any(c.isdigit() for c in s) and any(c.isalpha() for c in s)
)


def _planted(redactor, before: str, value: str, after: str):
    text = f"{before} {value} {after}"
    result = redactor.redact_text(text, "tenant", field="content")
    assert value not in result.text
    last = -1
    for f in result.findings:
        assert 0 <= f.start < f.end <= len(result.text)
        assert f.start >= last
        last = f.end
        assert result.text[f.start : f.end].startswith(f"<{f.entity_type}")
    return result


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=SURROUND, local=LOCAL, domain=DOMAIN, after=SURROUND)
def test_planted_email_is_removed(redactor, before, local, domain, after) -> None:
    _planted(redactor, before, f"{local}@{domain}", after)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=SURROUND,
    body=TOKEN_BODY,
    prefix=st.sampled_from(["ghp_", "gho_", "ghs_"]),
    after=SURROUND,
)
def test_planted_github_token_is_removed(redactor, before, body, prefix, after) -> None:
    _planted(redactor, before, prefix + body, after)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    before=SURROUND,
    after=SURROUND,
    pw=st.from_regex(r"[A-Za-z]{4}[0-9]{3}[!#%&]", fullmatch=True),
)
def test_planted_password_assignment_is_removed(redactor, before, after, pw) -> None:
    _planted(redactor, before + "\n", f"password={pw}", "\n" + after)
