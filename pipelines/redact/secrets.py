"""Secret detectors presidio lacks: vendor token formats, keys, keyword assignments.

Pure Python (``re`` only, no presidio import) so the fast path can use it directly;
``pipelines.redact.recognizers`` wraps the same rules as presidio recognizers.

Two kinds of rule:

* ``TokenRule``: a self-identifying format (``ghp_...``, ``AKIA...``, a JWT, a PEM
  block). The whole match is the secret. Each rule names literal substrings, one of
  which must occur in the text before its regex runs (a cheap pre-screen).
* Context rules: a keyword names the value (``password=...``, ``"api_key": "..."``,
  ``Authorization: Bearer ...``, ``postgres://user:pw@host``, ``--password X``,
  ``IDENTIFIED BY 'x'``). Only the value is the span, and it must pass length,
  entropy and placeholder checks so ``password=None`` or ``token: <redacted>``
  are left alone.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pipelines.redact.spans import Detection

# --------------------------------------------------------------------------- utils


def shannon_entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character (0.0 for empty)."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def _has_digit(value: str) -> bool:
    return any(ch.isdigit() for ch in value)


def _mixed(value: str) -> bool:
    """At least two of: lower, upper, digit."""
    classes = (
        any(ch.islower() for ch in value)
        + any(ch.isupper() for ch in value)
        + _has_digit(value)
    )
    return classes >= 2


def _random_token(value: str) -> bool:
    """A token with both letters and digits and some randomness."""
    return _has_digit(value) and any(ch.isalpha() for ch in value) and (
        shannon_entropy(value) >= 3.0
    )


def _b64_pem(value: str) -> bool:
    """Base64 text that decodes to an unencrypted PEM private key."""
    raw = value.strip()
    raw += "=" * (-len(raw) % 4)
    try:
        decoded = base64.b64decode(raw[: 4 * 4096], validate=False)
    except (binascii.Error, ValueError):
        return False
    return b"PRIVATE KEY" in decoded and b"ENCRYPTED" not in decoded


def _hex_only(value: str) -> bool:
    return all(ch in "0123456789abcdefABCDEF" for ch in value)


# --------------------------------------------------------------------- token rules


@dataclass(frozen=True)
class TokenRule:
    """A self-identifying secret format; the whole regex match is the secret."""

    name: str
    entity_type: str
    regex: str
    score: float = 0.95
    literals: tuple[str, ...] = ()
    validator: Callable[[str], bool] | None = None
    flags: int = 0

    def compiled(self) -> re.Pattern[str]:
        """The compiled regex (cached per rule object)."""
        return _compile(self.regex, self.flags)


_PATTERN_CACHE: dict[tuple[str, int], re.Pattern[str]] = {}


def _compile(regex: str, flags: int) -> re.Pattern[str]:
    key = (regex, flags)
    pattern = _PATTERN_CACHE.get(key)
    if pattern is None:
        pattern = _PATTERN_CACHE[key] = re.compile(regex, flags)
    return pattern


_B = r"(?<![A-Za-z0-9_])"  # left boundary for tokens that may follow '_' or '-'
_E = r"(?![A-Za-z0-9_])"

TOKEN_RULES: tuple[TokenRule, ...] = (
    TokenRule(
        "aws_access_key",
        "AWS_ACCESS_KEY",
        _B + r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|A3T[A-Z0-9])"
        r"[A-Z0-9]{16}" + _E,
        0.95,
        ("AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA",
         "ANVA", "APKA", "A3T"),
    ),
    TokenRule(
        "github",
        "GITHUB_TOKEN",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,251})" + _E,
        0.98,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    TokenRule(
        "gitlab",
        "GITLAB_TOKEN",
        _B + r"(?:glpat|gldt|glrt|glcbt|glptt|glft|glsoat|gloas|glimt|glagent|glffct)"
        r"-[A-Za-z0-9_\-]{20,}" + r"(?![A-Za-z0-9_\-])",
        0.98,
        ("glpat-", "gldt-", "glrt-", "glcbt-", "glptt-", "glft-", "glsoat-", "gloas-",
         "glimt-", "glagent-", "glffct-"),
    ),
    TokenRule(
        "slack",
        "SLACK_TOKEN",
        _B + r"xox[abposre]-(?:\d+-)?[A-Za-z0-9\-]{10,}",
        0.95,
        ("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-"),
    ),
    TokenRule(
        "slack",
        "SLACK_TOKEN",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"[A-Za-z0-9_/+\-]{20,}",
        0.95,
        ("hooks.slack.com",),
    ),
    TokenRule(
        "stripe",
        "STRIPE_KEY",
        _B + r"(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{10,247}" + _E,
        0.95,
        ("_live_", "_test_"),
    ),
    TokenRule(
        "anthropic",
        "ANTHROPIC_API_KEY",
        _B + r"sk-ant-(?:api|admin|sid|oat|ort)\d{2}-[A-Za-z0-9_\-]{20,}",
        0.98,
        ("sk-ant-",),
    ),
    TokenRule(
        "openai",
        "OPENAI_API_KEY",
        _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}"
        r"(?![A-Za-z0-9_\-])",
        0.9,
        ("sk-",),
        _random_token,
    ),
    TokenRule(
        "jwt",
        "JWT",
        _B + r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-+/=]*",
        0.95,
        ("eyJ",),
    ),
    TokenRule(
        "private_key",
        "PRIVATE_KEY",
        r"-----BEGIN[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,65536}?-----END[ A-Z0-9]{0,30}PRIVATE KEY(?: BLOCK)?-----"
        r"|[A-Za-z0-9+/=\s\\:,\-]*)",
        0.99,
        ("PRIVATE KEY",),
    ),
    TokenRule(
        "private_key",
        "PRIVATE_KEY",
        _B + r"LS0tLS1CRUdJTi[A-Za-z0-9+/]{20,}={0,2}",
        0.9,
        ("LS0tLS1CRUdJTi",),
        _b64_pem,
    ),
    # Other vendor formats with a distinctive prefix, all typed API_KEY.
    *(
        TokenRule("vendor_tokens", "API_KEY", _B + regex + _E, 0.9, literals, check)
        for regex, literals, check in (
            (r"hf_[A-Za-z0-9]{30,}", ("hf_",), _mixed),
            (r"npm_[A-Za-z0-9]{36}", ("npm_",), None),
            (r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", ("pypi-",), None),
            (r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ("AGE-SECRET",),
             None),
            (r"xai-[A-Za-z0-9]{50,}", ("xai-",), None),
            (r"gsk_[A-Za-z0-9]{40,}", ("gsk_",), None),
            (r"pplx-[A-Za-z0-9]{40,}", ("pplx-",), None),
            (r"tvly-[A-Za-z0-9\-]{20,}", ("tvly-",), _mixed),
            (r"tgp_v1_[A-Za-z0-9_\-]{30,}", ("tgp_v1_",), None),
            (r"AIza[0-9A-Za-z_\-]{35}", ("AIza",), None),
            (r"ya29\.[0-9A-Za-z_\-]{20,}", ("ya29.",), None),
            (r"GOCSPX-[A-Za-z0-9_\-]{20,}", ("GOCSPX-",), None),
            (r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", ("SG.",), None),
            (r"do[opr]_v1_[a-f0-9]{64}", ("_v1_",), None),
            (r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",), None),
            (r"AT(?:ATT|CTT)3[A-Za-z0-9_\-=]{60,}", ("ATATT3", "ATCTT3"), None),
            (r"ATBB[A-Za-z0-9]{28,}", ("ATBB",), _mixed),
            (r"BBDC-[A-Za-z0-9+/]{40,}", ("BBDC-",), None),
            (r"lin_(?:api|oauth)_[A-Za-z0-9]{40}", ("lin_",), None),
            (r"(?:secret_|ntn_)[A-Za-z0-9]{43,}", ("secret_", "ntn_"), _mixed),
            (r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}", ("dp.",), None),
            (r"dapi[a-f0-9]{32}(?:-\d)?", ("dapi",), None),
            (r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{20,}", ("dckr_",), _mixed),
            (r"SWM(?:TKN|KEY)-1-[A-Za-z0-9\-]{40,}", ("SWMTKN-", "SWMKEY-"), None),
            (r"sntry[su]_[A-Za-z0-9_=\-+/]{40,}", ("sntry",), None),
            (r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", ("glsa_",), None),
            (r"glc_[A-Za-z0-9+/]{32,}={0,2}", ("glc_",), None),
            (r"hv[sb]\.[A-Za-z0-9_\-]{90,}", ("hvs.", "hvb."), None),
            (r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,}", (".atlasv1.",), None),
            (r"NRAK-[A-Z0-9]{27}", ("NRAK-",), None),
            (r"ph[cxsra]_[A-Za-z0-9]{40,}", ("phc_", "phx_", "phs_", "phr_", "pha_"),
             None),
            (r"PMA[KT]-[A-Za-z0-9\-]{24,}", ("PMAK-", "PMAT-"), _has_digit),
            (r"pscale_(?:pw|tkn|oauth)_[A-Za-z0-9_\-.]{30,}", ("pscale_",), None),
            (r"sbp_(?:v0_)?[a-f0-9]{40}", ("sbp_",), None),
            (r"sq[upa]_[a-f0-9]{40}", ("squ_", "sqp_", "sqa_"), None),
            (r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}", ("sq0",), None),
            (r"EAAA[A-Za-z0-9_\-]{60}", ("EAAA",), None),
            (r"rubygems_[a-f0-9]{48}", ("rubygems_",), None),
            (r"CLOJARS_[a-f0-9]{60}", ("CLOJARS_",), None),
            (r"cf(?:at|ut|k)_[A-Za-z0-9]{40,}", ("cfat_", "cfut_", "cfk_"), None),
            (r"vc[pkiar]_[A-Za-z0-9]{24,}", ("vcp_", "vck_", "vci_", "vca_", "vcr_"),
             _mixed),
            (r"SK[0-9a-fA-F]{32}", ("SK",), _has_digit),
            (r"\d{8,10}:AA[A-Za-z0-9_\-]{33}", (":AA",), None),
            (r"[MN][A-Za-z\d]{23,25}\.[\w\-]{6}\.[\w\-]{27,}", (".",), _mixed),
            (r"key-[a-f0-9]{32}", ("key-",), None),
            (r"[a-f0-9]{32}-us\d{1,2}", ("-us",), None),
            (r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", ("xkeysib-",), None),
            (r"ops_eyJ[A-Za-z0-9_\-]{50,}", ("ops_eyJ",), None),
            (r"bedrock-api-key-[A-Za-z0-9+/=]{20,}", ("bedrock-api-key-",), None),
            (r"ABSK[A-Za-z0-9+/]{100,}={0,2}", ("ABSK",), None),
            (r"amzn\.mws\.[0-9a-z]{8}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{12}",
             ("amzn.mws.",), None),
            (r"da2-[a-z0-9]{26}", ("da2-",), None),
            (r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", ("Q~",), None),
            (r"figd_[A-Za-z0-9_\-]{40,}", ("figd_",), None),
            (r"HRKU-[A-Za-z0-9_\-]{40,}", ("HRKU-",), None),
            (r"nf[pc]_[A-Za-z0-9]{36,}", ("nfp_", "nfc_"), None),
            (r"oy2[a-z0-9]{43}", ("oy2",), None),
            (r"cosmo_[a-f0-9]{32}", ("cosmo_",), None),
            (r"akab-[a-z0-9]{16}-[a-z0-9]{16}", ("akab-",), None),
            (r"dnkey-[A-Z0-9=_\-]{26}-[A-Z0-9=_\-]{52}", ("dnkey-",), None),
            (r"SU[A-Z2-7]{56}", ("SU",), None),
            (r"LTAI[A-Za-z0-9]{12,20}", ("LTAI",), _mixed),
            (r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}",
             ("access_token$",), None),
            (r"EAA[A-Za-z0-9]{90,}", ("EAA",), None),
            (r"IGQV[A-Za-z0-9_\-]{100,}", ("IGQV",), None),
            (r"sl\.[A-Za-z0-9_\-]{130,}", ("sl.",), None),
            (r"A{20,}[A-Za-z0-9%]{60,}", ("AAAAAAAAAAAAAAAAAAAA",), None),
            (r"LLM\|\d+\|[A-Za-z0-9_\-]{20,}", ("LLM|",), None),
            (r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/"
             r"[A-Za-z0-9_\-]{50,}", ("/api/webhooks/",), None),
        )
    ),
)

# ----------------------------------------------------------------- context rules

#: Key words that make the value a password.
_PASSWORD_WORDS = frozenset(
    {"password", "passwd", "passphrase", "pwd", "pw", "pass", "passwort", "pword",
     "userpassword", "dbpassword", "mysqlpassword", "passcode", "pin"}
)
#: Key words that make the value a secret (token, key, credential).
_SECRET_WORDS = frozenset(
    {"secret", "secrets", "token", "apikey", "credential", "credentials", "auth",
     "bearer", "privatekey", "accesskey", "secretkey", "clientsecret", "signature",
     "sig", "salt", "cred", "creds", "sessionid", "cookie", "jwt", "otp", "totp",
     "seed", "mnemonic", "encryptionkey", "signingkey", "masterkey", "license",
     "licensekey", "activationkey", "srt"}
)
#: Two-word combinations that are secrets (``api key``, ``access key``...).
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
     ("client", "secret"), ("app", "secret"), ("auth", "key"), ("api", "token"),
     ("access", "token"), ("refresh", "token"), ("session", "key"),
     ("encryption", "key"), ("signing", "key"), ("master", "key"),
     ("activation", "key"), ("license", "key"), ("account", "key"),
     ("storage", "key"), ("shared", "key"), ("consumer", "secret"), ("x", "api")}
)
#: If the key ends in one of these words it names metadata, not the secret.
_META_WORDS = frozenset(
    {"id", "ids", "name", "names", "path", "file", "files", "dir", "url", "uri",
     "urls", "endpoint", "length", "len", "size", "type", "types", "count", "timeout",
     "format", "field", "prompt", "env", "var", "header", "enabled", "required",
     "policy", "hint", "label", "placeholder", "mode", "min", "max", "limit",
     "version", "ttl", "expiry", "expires", "expiration", "expire", "reset",
     "manager", "store", "provider", "location", "ref", "arn", "template", "budget",
     "usage", "used", "index", "pattern", "regex", "rule", "rules", "strength",
     "validation", "validator", "changed", "change", "prefix", "suffix", "message",
     "msg", "error", "errors", "flag", "status", "description", "desc", "help",
     "title", "text", "kind", "class", "schema", "method", "scheme", "key",
     "storage", "column", "table", "input", "button", "form", "page", "link",
     "callback", "handler", "request", "response", "params", "param", "option",
     "options", "config", "setting", "settings", "source", "algorithm", "alg",
     "encoding", "digest", "hash", "hashed", "filter", "list", "lifetime", "age",
     "interval", "duration", "generator", "factory", "mask"}
)
_DEFINITELY_NOT = frozenset(
    {"author", "authors", "authority", "authenticate", "authentication",
     "authenticated", "authorize", "authorized", "authorizer", "tokenizer",
     "tokens", "tokenize", "tokenized", "passenger", "passengers", "passport",
     "bypass", "compass", "passthrough", "passive", "keyboard", "keyword",
     "keywords", "secretary", "pinned", "pins"}
)

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def key_words(key: str) -> list[str]:
    """Split an identifier into lower-case words (snake, kebab, dotted, camel)."""
    words: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", key):
        if part:
            words.extend(w.lower() for w in _CAMEL.findall(part))
    return words


def classify_key(key: str) -> str | None:
    """``"PASSWORD"``, ``"SECRET"``, ``"WEAK"`` (a bare ``key``) or None."""
    words = key_words(key)
    if not words:
        return None
    if words[-1] in _META_WORDS and words[-1] != "key":
        return None
    if any(w in _DEFINITELY_NOT for w in words):
        return None
    joined = "".join(words)
    if any(w in _PASSWORD_WORDS for w in words) or "password" in joined:
        return "PASSWORD"
    if any(w in _SECRET_WORDS for w in words):
        return "SECRET"
    if any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False)):
        return "SECRET"
    if "apikey" in joined or "secretkey" in joined or "accesskey" in joined:
        return "SECRET"
    if words[-1] == "key":
        return "WEAK"
    return None


_PLACEHOLDER_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "empty", "n/a", "na",
     "todo", "tbd", "xxx", "str", "string", "int", "integer", "bool", "boolean",
     "bytes", "optional", "required", "redacted", "masked", "hidden", "secret",
     "password", "passwd", "token", "apikey", "api_key", "value", "example",
     "sample", "dummy", "test", "testing", "changeme", "placeholder", "default",
     "unknown", "unset", "missing", "invalid", "incorrect", "wrong", "expired",
     "public", "private", "yes", "no", "on", "off", "env", "any", "object", "dict",
     "list", "self", "this", "new", "get", "set", "prompt", "input", "foo", "bar",
     "foobar", "baz", "sha256", "md5", "bcrypt", "hash", "type", "key", "secret_key"}
)
_PLACEHOLDER_MARKERS = (
    "your", "example", "placeholder", "redacted", "changeme", "xxxx", "****",
    "<", ">", "${", "{{", "}}", "%(", "$(", "process.env", "os.environ", "getenv",
    "environ[", "secrets.", "vault:", "...", "…",
)
_ENV_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_IDENT_SNAKE = re.compile(r"[a-z_][a-z0-9]*(?:_[a-z0-9]+)+")
_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_NUMBERISH = re.compile(r"[\d.,:_\-+]+")


def acceptable_value(
    value: str,
    family: str,
    quoted: bool,
    min_len: int,
    min_entropy: float,
) -> bool:
    """Whether a keyword-assigned ``value`` looks like a real secret.

    ``family`` is ``PASSWORD``, ``SECRET`` or ``WEAK`` (bare ``key``). Rejects
    placeholders (``None``, ``<redacted>``, ``${VAR}``, ``****``), references
    (``os.environ[...]``, ``settings.TOKEN``, ``user_password``), numbers, and
    values below the length/entropy thresholds.
    """
    if len(value) < min_len or len(value) > 4096:
        return False
    low = value.lower()
    if low in _PLACEHOLDER_VALUES or low.strip("'\"`") in _PLACEHOLDER_VALUES:
        return False
    if any(marker in low for marker in _PLACEHOLDER_MARKERS):
        return False
    if len(set(value)) <= 2:
        return False
    if value[0] in "$%@&*/.~" and not quoted:
        return False
    if value.startswith(("http://", "https://", "file:", "./", "../", "~/", "/")):
        return False
    if _NUMBERISH.fullmatch(value) and not (family == "PASSWORD" and len(value) >= 8):
        return False
    if _ENV_NAME.fullmatch(value):
        return False
    if not quoted and (_IDENT_SNAKE.fullmatch(value) or _DOTTED.fullmatch(value)):
        return False
    entropy = shannon_entropy(value)
    if entropy < min_entropy:
        return False
    if family == "PASSWORD":
        if not quoted and value.isalpha() and (value.islower() or value.istitle()):
            return False  # an English word in prose: "password: required"
        return True
    if family == "WEAK":
        return len(value) >= 16 and _mixed(value) and entropy >= 3.5
    # SECRET: tokens have no spaces and are not plain words.
    if value.isalpha() and (value.islower() or value.istitle()):
        return False
    return _mixed(value) or _hex_only(value) or entropy >= 3.5


_QUOTE = r"(?:\\?[\"'`]|&quot;)"
_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}"
#: ``key <sep> value``: key optionally quoted, ``=``, ``:``, ``:=``, ``=>``, ``==``,
#: ``->``, or `` is ``/`` are `` (prose). The value is quoted or a bare token.
_ASSIGN_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?P<kq>" + _QUOTE + r")?(?P<key>" + _KEY + r")(?P=kq)?"
    r"(?:\s*(?::=|=>|==|!=|->|=|:)\s*|\s+(?:is|are|was)\s+)"
    r"(?:(?P<q>" + _QUOTE + r")(?P<qval>[^\s\"'`\\<>&]{1,4096}?)(?P=q)"
    r"|(?P<val>[^\s\"'`\\,;<>()\[\]{}]{1,4096}))"
)
_CLI_RE = re.compile(
    r"(?:^|(?<=\s))--?(?P<key>[A-Za-z][A-Za-z0-9_\-]{1,40})(?:\s+|=)"
    r"(?:(?P<q>" + _QUOTE + r")(?P<qval>[^\s\"'`\\]{1,512}?)(?P=q)"
    r"|(?P<val>[^\s\"'`\\,;<>()]{1,512}))"
)
_AUTH_RE = re.compile(
    r"(?i)\b(?:authorization|proxy-authorization|x-api-key|x-auth-token|api-key)"
    r"[\"']?\s*[:=]\s*[\"']?(?:(?:bearer|basic|token|digest|apikey|bot)\s+)?"
    r"(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)"
)
_BEARER_RE = re.compile(r"\b[Bb]earer\s+(?P<value>[A-Za-z0-9\-._~+/]{16,}=*)")
_URL_CRED_RE = re.compile(
    r"\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://(?P<user>[^\s:/@\"'<>]{1,128}):"
    r"(?P<value>[^\s@/\"'<>]{1,256})@[A-Za-z0-9.\-\[\]]+"
)
_CURL_USER_RE = re.compile(
    r"(?:^|\s)(?:-u|--user)\s+[\"']?[^\s:\"']{1,64}:(?P<value>[^\s\"']{3,256})"
)
_SQL_RE = re.compile(
    r"(?i)\bidentified\s+(?:with\s+\w+\s+)?by\s+(?:password\s+)?"
    r"(?P<q>[\"'`]?)(?P<value>[^\s\"'`;]{3,256})(?P=q)"
    r"|\b(?:encrypted\s+|unencrypted\s+)?password\s+(?P<q2>[\"'])"
    r"(?P<value2>[^\s\"']{3,256})(?P=q2)"
)
_SECURE_STRING_RE = re.compile(
    r"(?i)ConvertTo-SecureString\s+(?:-String\s+)?(?:-AsPlainText\s+)?(?:-Force\s+)?"
    r"(?:\\?[\"'])?(?P<value>[^\s\"'\\]{4,256})"
)
_LONG_RUN = re.compile(r"[A-Za-z0-9_\-+/=.~:$|%]{16,}")
_PRAGMA_RE = re.compile(r"pragma:\s*(?:allowlist|whitelist)[ \-]secret", re.I)

#: Names the ``pii.secrets.recognizers`` switches accept.
RULE_NAMES = frozenset(
    {r.name for r in TOKEN_RULES}
    | {"aws_secret_key", "keyword_assignment", "auth_header", "url_credentials",
       "cli_password", "sql_password"}
)

#: Cheap case-insensitive pre-screen for the context rules.
_CONTEXT_HINTS = (
    "pass", "pwd", "pw", "secret", "token", "key", "auth", "bearer", "cred", "://",
    "identified", "securestring", "-u ", "--user", "sig", "salt", "cookie", "session",
    "otp", "seed", "pin", "srt", "jwt", "license",
)


@dataclass(frozen=True)
class SecretConfig:
    """The thresholds the context rules use (mirrors ``schemas.policy``)."""

    min_entropy: float = 3.0
    min_length: int = 8
    password_min_entropy: float = 1.0
    password_min_length: int = 6
    honor_allowlist_pragma: bool = True
    disabled: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: object) -> SecretConfig:
        """Build from ``schemas.policy.SecretSettings``."""
        return cls(
            min_entropy=settings.min_entropy,  # type: ignore[attr-defined]
            min_length=settings.min_length,  # type: ignore[attr-defined]
            password_min_entropy=settings.password_min_entropy,  # type: ignore[attr-defined]
            password_min_length=settings.password_min_length,  # type: ignore[attr-defined]
            honor_allowlist_pragma=settings.honor_allowlist_pragma,  # type: ignore[attr-defined]
            disabled=frozenset(
                k for k, on in settings.recognizers.items() if not on  # type: ignore[attr-defined]
            ),
        )

    def thresholds(self, family: str) -> tuple[int, float]:
        """(min length, min entropy) for a key family."""
        if family == "PASSWORD":
            return self.password_min_length, self.password_min_entropy
        return self.min_length, self.min_entropy


class SecretDetector:
    """Runs every enabled secret rule over a text; pure Python, reusable, picklable."""

    def __init__(
        self, config: SecretConfig | None = None, entity_types: Iterable[str] = ()
    ) -> None:
        self.config = config or SecretConfig()
        wanted = frozenset(entity_types)
        self._wanted = wanted
        self._token_rules = tuple(
            r
            for r in TOKEN_RULES
            if r.name not in self.config.disabled
            and (not wanted or r.entity_type in wanted)
        )
        self._context = not wanted or bool(
            wanted & {"PASSWORD", "SECRET", "AWS_SECRET_KEY"}
        )

    def _want(self, entity_type: str, rule: str) -> bool:
        if rule in self.config.disabled:
            return False
        return not self._wanted or entity_type in self._wanted

    def detect(self, text: str) -> list[Detection]:
        """All secret detections in ``text`` (may overlap; the engine resolves)."""
        out: list[Detection] = []
        # Every token format is one run of >= 16 token characters (PEM bodies too),
        # so texts without such a run skip the token rules; the literal
        # pre-screen then runs on the long runs only.
        runs = _LONG_RUN.findall(text) if self._token_rules else []
        blob = " ".join(runs)
        for rule in self._token_rules if runs else ():
            haystack = text if rule.name == "private_key" else blob
            if rule.literals and not any(lit in haystack for lit in rule.literals):
                continue
            for match in rule.compiled().finditer(text):
                value = match.group(0)
                if rule.validator is not None and not rule.validator(value):
                    continue
                out.append(
                    Detection(
                        match.start(), match.end(), rule.entity_type, rule.score,
                        f"secret:{rule.name}",
                    )
                )
        if self._context:
            lowered = text.lower()
            if any(hint in lowered for hint in _CONTEXT_HINTS):
                out.extend(self._context_rules(text, lowered))
        if out and self.config.honor_allowlist_pragma and "pragma" in text:
            out = [d for d in out if not _allowlisted(text, d.start)]
        return out

    # ------------------------------------------------------------------ helpers
    def _emit(
        self,
        out: list[Detection],
        start: int,
        end: int,
        family: str,
        rule: str,
        score: float,
        key: str = "",
    ) -> None:
        etype = "PASSWORD" if family == "PASSWORD" else "SECRET"
        if etype == "SECRET" and "aws" in key.lower() and (end - start) == 40:
            etype = "AWS_SECRET_KEY"
            rule = "aws_secret_key"
        if self._want(etype, rule if rule != "aws_secret_key" else rule):
            out.append(Detection(start, end, etype, score, f"secret:{rule}"))

    def _context_rules(self, text: str, lowered: str) -> list[Detection]:
        cfg = self.config
        out: list[Detection] = []
        if "keyword_assignment" not in cfg.disabled:
            for m in _assignments(text):
                family = classify_key(m.group("key"))
                if family is None:
                    continue
                quoted = m.group("qval") is not None
                group = "qval" if quoted else "val"
                value = m.group(group)
                start, end = m.span(group)
                if not quoted:
                    stripped = value.rstrip(".,:!?" if family != "PASSWORD" else ".,:?")
                    end -= len(value) - len(stripped)
                    value = stripped
                    if text[end : end + 1] in ("(", "["):
                        continue  # a call or an index, not a literal
                min_len, min_ent = cfg.thresholds(family)
                if acceptable_value(value, family, quoted, min_len, min_ent):
                    score = 0.8 if family != "WEAK" else 0.6
                    self._emit(
                        out, start, end, family, "keyword_assignment", score,
                        m.group("key"),
                    )
        if "cli_password" not in cfg.disabled and "-" in text:
            for m in _CLI_RE.finditer(text):
                family = classify_key(m.group("key"))
                if family not in ("PASSWORD", "SECRET"):
                    continue
                quoted = m.group("qval") is not None
                group = "qval" if quoted else "val"
                value = m.group(group)
                min_len, min_ent = cfg.thresholds(family)
                if acceptable_value(value, family, quoted, min_len, min_ent):
                    self._emit(out, *m.span(group), family, "cli_password", 0.8)
        if "auth_header" not in cfg.disabled and (
            "auth" in lowered or "bearer" in lowered or "api-key" in lowered
        ):
            for regex in (_AUTH_RE, _BEARER_RE):
                for m in regex.finditer(text):
                    value = m.group("value")
                    if acceptable_value(value, "SECRET", True, 8, cfg.min_entropy):
                        self._emit(out, *m.span("value"), "SECRET", "auth_header", 0.85)
        if "url_credentials" not in cfg.disabled:
            if "://" in text:
                for m in _URL_CRED_RE.finditer(text):
                    value = m.group("value")
                    if acceptable_value(value, "PASSWORD", True, 3, 1.0):
                        self._emit(
                            out, *m.span("value"), "PASSWORD", "url_credentials", 0.9
                        )
            if "-u " in text or "--user" in text:
                for m in _CURL_USER_RE.finditer(text):
                    value = m.group("value")
                    if acceptable_value(value, "PASSWORD", True, 3, 1.0):
                        self._emit(
                            out, *m.span("value"), "PASSWORD", "url_credentials", 0.85
                        )
        if "sql_password" not in cfg.disabled and (
            "identified" in lowered or "password" in lowered
        ):
            for m in _SQL_RE.finditer(text):
                grp = "value" if m.group("value") is not None else "value2"
                value = m.group(grp)
                if acceptable_value(value, "PASSWORD", True, 3, 1.0):
                    self._emit(out, *m.span(grp), "PASSWORD", "sql_password", 0.85)
        if "securestring" in lowered and "cli_password" not in cfg.disabled:
            for m in _SECURE_STRING_RE.finditer(text):
                value = m.group("value")
                if acceptable_value(value, "PASSWORD", True, 4, 1.0):
                    self._emit(out, *m.span("value"), "PASSWORD", "cli_password", 0.85)
        return out


_KEY_HINT = re.compile(
    r"(?i)pass|pwd|pw|secret|token|key|auth|cred|bearer|sig|salt|cookie|session|"
    r"otp|seed|pin|srt|jwt|license|mnemonic"
)
_IDENT_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
)


def _assignments(text: str) -> list[re.Match[str]]:
    """``key = value`` matches whose key contains a secret keyword.

    Anchored at keyword hits (not a scan over every identifier), which is faster
    and never lets a harmless ``config: password=...`` swallow the real pair.
    """
    out = []
    done = -1
    for hit in _KEY_HINT.finditer(text):
        start = hit.start()
        if start < done:
            continue
        while start > 0 and text[start - 1] in _IDENT_CHARS:
            start -= 1
        if start > 0 and text[start - 1] in "\"'`":
            start -= 1
            if start > 0 and text[start - 1] == "\\":
                start -= 1
        elif text.startswith("&quot;", max(0, start - 6)) and start >= 6:
            start -= 6
        m = _ASSIGN_RE.match(text, start)
        if m is None:
            done = hit.end()
            continue
        out.append(m)
        done = m.end("key")
    return out


def _allowlisted(text: str, pos: int) -> bool:
    line_start = text.rfind("\n", 0, pos) + 1
    line_end = text.find("\n", pos)
    if line_end < 0:
        line_end = len(text)
    return _PRAGMA_RE.search(text, line_start, line_end) is not None


def find_secrets(text: str, config: SecretConfig | None = None) -> list[Detection]:
    """Convenience: every secret in ``text`` with default settings."""
    return SecretDetector(config).detect(text)
