"""Secret detectors presidio lacks: vendor token formats, keys, keyword assignments.

Pure Python (``re`` only, no presidio import) so the fast path can use it directly;
``pipelines.redact.recognizers`` wraps the same rules as presidio recognizers.

Two kinds of rule:

* ``TokenRule``: a self-identifying format (``ghp_...``, ``AKIA...``, a JWT, a PEM
  block). The whole match is the secret. Each rule names literal substrings, one of
  which must occur in the text before its regex runs (a cheap pre-screen).
* Context rules: a keyword names the value (``password=...``, ``"api_key": "..."``,
  ``Authorization: Bearer ...``, ``postgres://user:pw@host``, ``--password X``,
  ``IDENTIFIED BY 'x'``, ``passwd: str = "x"``, ``<password>x</password>``,
  ``getenv("DB_PASSWORD", "x")``, ``mysql -px``). Only the value is the span, and
  it must pass length, entropy and placeholder checks so ``password=None`` or
  ``token: <redacted>`` are left alone. A keyword followed by a value with no
  ``=``/``:`` (``user master password x``, ``LOGIN PASSWORD x``) also counts when
  the value looks generated (``_credential_like``); one mask or foreign word
  may sit between them (``api-key xxx x``, ``secret 암호화 x``). Keys may be
  misspelt (``pswd``, ``paasword``) or two words (``Secret Key: x``). Short values
  need only the entropy their length allows (``entropy_floor``).
* Keyword-less tokens (``high_entropy``): random-looking base64 of 32-100
  characters, with filters for what agent text is full of (hashes, ids, paths,
  identifiers, encoded text, wrapped certificate lines).

A value a context rule found is also redacted wherever else it occurs, standing
alone, in the same text (``root/<value>`` next to ``password: <value>``).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cache

from ctxledger.pipelines.redact.lexicon import common_english
from ctxledger.pipelines.redact.spans import Detection

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
    return (
        _has_digit(value)
        and any(ch.isalpha() for ch in value)
        and (shannon_entropy(value) >= 3.0)
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


#: Left boundary for tokens that may follow '_' or '-'; an ANSI colour code right
#: before the token (``\x1b[93m`` in coloured terminal output) counts as one too.
_B = (
    r"(?:(?<![A-Za-z0-9_])|(?<=\x1b\[\dm)|(?<=\x1b\[\d\dm)|(?<=\x1b\[\d;\d\dm)"
    r"|(?<=\x1b\[\d\d;\dm))"
)
_E = r"(?![A-Za-z0-9_])"

TOKEN_RULES: tuple[TokenRule, ...] = (
    TokenRule(
        "aws_access_key",
        "AWS_ACCESS_KEY",
        _B + r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|A3T[A-Z0-9])"
        r"[A-Z0-9]{16}" + _E,
        0.95,
        (
            "AKIA",
            "ASIA",
            "ABIA",
            "ACCA",
            "AGPA",
            "AIDA",
            "AROA",
            "AIPA",
            "ANPA",
            "ANVA",
            "APKA",
            "A3T",
        ),
    ),
    TokenRule(
        "github",
        "GITHUB_TOKEN",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,251}"
        # app installation tokens with a date stamp: ghs_20260523_<JWT-like body>
        r"|gh[sr]_\d{6,8}_[A-Za-z0-9_\-.]{20,2000})" + _E,
        0.98,
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    TokenRule(
        "gitlab",
        "GITLAB_TOKEN",
        _B + r"(?:glpat|gldt|glrtr?|glcbt|glptt|glft|glsoat|gloas|glimt|glagent|glffct"
        r"|glwt|gltst|glsa)-[A-Za-z0-9_\-]{20,}(?:\.[A-Za-z0-9_\-]{2,})*"
        r"(?![A-Za-z0-9_\-])",
        0.98,
        (
            "glpat-",
            "gldt-",
            "glrt-",
            "glrtr-",
            "glcbt-",
            "glptt-",
            "glft-",
            "glsoat-",
            "gloas-",
            "glimt-",
            "glagent-",
            "glffct-",
            "glwt-",
            "gltst-",
            "glsa-",
        ),
    ),
    TokenRule(
        # runner registration tokens (legacy prefix) and the session cookie
        "gitlab",
        "GITLAB_TOKEN",
        _B
        + r"GR1348941[A-Za-z0-9_\-]{20,}"
        + _E
        + r"|(?<=_gitlab_session=)[0-9a-f]{32}"
        + _E,
        0.95,
        ("GR1348941", "_gitlab_session="),
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
        # webhook signing secrets carry no live/test marker
        "stripe",
        "STRIPE_KEY",
        _B + r"whsec_[A-Za-z0-9+/]{24,128}={0,2}" + _E,
        0.95,
        ("whsec_",),
        _has_digit,
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
        # base64 DER private keys without a PEM header (PKCS#1 RSA, PKCS#8, SEC1
        # EC), wrapped lines included: "MIIEpAIBAAKCAQEA...", "MHcCAQEEI..."
        "private_key",
        "PRIVATE_KEY",
        _B + r"(?:MII[A-Za-z0-9+/]{3}IBA(?:A[JK]|DANBgkqhkiG9w0BAQEFAAS)|MHcCAQEE)"
        r"[A-Za-z0-9+/]{20,}(?:(?:\r?\n[ \t]*|\\n)[A-Za-z0-9+/]{16,})*={0,2}",
        0.9,
        ("IBAAJ", "IBAAK", "IBADANBgkqhkiG9w0BAQEFAAS", "MHcCAQEE"),
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
            (
                r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",
                ("AGE-SECRET",),
                None,
            ),
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
            (
                r"ph[cxsra]_[A-Za-z0-9]{40,}",
                ("phc_", "phx_", "phs_", "phr_", "pha_"),
                None,
            ),
            (r"PMA[KT]-[A-Za-z0-9\-]{24,}", ("PMAK-", "PMAT-"), _has_digit),
            (r"pscale_(?:pw|tkn|oauth)_[A-Za-z0-9_\-.]{30,}", ("pscale_",), None),
            (r"sbp_(?:v0_)?[a-f0-9]{40}", ("sbp_",), None),
            (r"sq[upa]_[a-f0-9]{40}", ("squ_", "sqp_", "sqa_"), None),
            (r"sq0(?:atp|csp)-[A-Za-z0-9_\-]{22,}", ("sq0",), None),
            (r"EAAA[A-Za-z0-9_\-]{60}", ("EAAA",), None),
            (r"rubygems_[a-f0-9]{48}", ("rubygems_",), None),
            (r"CLOJARS_[a-f0-9]{60}", ("CLOJARS_",), None),
            (r"cf(?:at|ut|k)_[A-Za-z0-9]{40,}", ("cfat_", "cfut_", "cfk_"), None),
            (
                r"vc[pkiar]_[A-Za-z0-9]{24,}",
                ("vcp_", "vck_", "vci_", "vca_", "vcr_"),
                _mixed,
            ),
            (r"SK[0-9a-fA-F]{32}", ("SK",), _has_digit),
            (r"\d{8,10}:AA[A-Za-z0-9_\-]{33}", (":AA",), None),
            (r"[MN][A-Za-z\d]{23,25}\.[\w\-]{6}\.[\w\-]{27,}", (".",), _mixed),
            (r"key-[a-f0-9]{32}", ("key-",), None),
            (r"[a-f0-9]{32}-us\d{1,2}", ("-us",), None),
            (r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}", ("xkeysib-",), None),
            (r"ops_eyJ[A-Za-z0-9_\-]{50,}", ("ops_eyJ",), None),
            (r"bedrock-api-key-[A-Za-z0-9+/=]{20,}", ("bedrock-api-key-",), None),
            (r"ABSK[A-Za-z0-9+/]{100,}={0,2}", ("ABSK",), None),
            (
                r"amzn\.mws\.[0-9a-z]{8}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{4}-[0-9a-z]{12}",
                ("amzn.mws.",),
                None,
            ),
            (r"da2-[a-z0-9]{26}", ("da2-",), None),
            (r"[A-Za-z0-9_~.\-]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}", ("Q~",), None),
            (r"figd_[A-Za-z0-9_\-]{40,}", ("figd_",), None),
            (r"HRKU-[A-Za-z0-9_\-]{36,}", ("HRKU-",), _has_digit),
            (r"eyJrIjoi[A-Za-z0-9+/=_\-]{40,}", ("eyJrIjoi",), None),
            (r"TlRMTVNTUAADAAAA[A-Za-z0-9+/]{20,}={0,2}", ("TlRMTVNTUAAD",), None),
            (r"llx-[A-Za-z0-9_\-]{40,}", ("llx-",), _mixed),
            (
                r"NR(?:BR|II|JS|IQ|RA|SP)-[A-Za-z0-9_\-]{19,}",
                ("NRBR-", "NRII-", "NRJS-", "NRIQ-", "NRRA-", "NRSP-"),
                _has_digit,
            ),
            (r"[A-Za-z0-9]{36}NRAL", ("NRAL",), _has_digit),
            (r"1//0[A-Za-z0-9_\-]{40,}", ("1//0",), _mixed),
            (r"[A-Za-z0-9]{11}AAAAAAAAAA[A-Za-z0-9_\-]{43}", ("AAAAAAAAAA",), _mixed),
            (r"\d{15,16}\|[A-Za-z0-9_\-]{27,}", ("|",), _mixed),
            (r"cmVmdGtuOjAxOj[A-Za-z0-9+/=]{40,}", ("cmVmdGtu",), None),
            (r"nf[pc]_[A-Za-z0-9]{36,}", ("nfp_", "nfc_"), None),
            (r"oy2[a-z0-9]{43}", ("oy2",), None),
            (r"cosmo_[a-f0-9]{32}", ("cosmo_",), None),
            (r"akab-[a-z0-9]{16}-[a-z0-9]{16}", ("akab-",), None),
            (r"dnkey-[A-Z0-9=_\-]{26}-[A-Z0-9=_\-]{52}", ("dnkey-",), None),
            (r"SU[A-Z2-7]{56}", ("SU",), None),
            (r"LTAI[A-Za-z0-9]{12,20}", ("LTAI",), _mixed),
            (
                r"access_token\$production\$[a-z0-9]{16}\$[a-f0-9]{32}",
                ("access_token$",),
                None,
            ),
            (r"EAA[A-Za-z0-9]{90,}", ("EAA",), None),
            (r"IGQV[A-Za-z0-9_\-]{100,}", ("IGQV",), None),
            (r"sl\.[A-Za-z0-9_\-]{130,}", ("sl.",), None),
            (r"A{20,}[A-Za-z0-9%]{60,}", ("AAAAAAAAAAAAAAAAAAAA",), None),
            (r"LLM\|\d+\|[A-Za-z0-9_\-]{20,}", ("LLM|",), None),
            (
                r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/"
                r"[A-Za-z0-9_\-]{50,}",
                ("/api/webhooks/",),
                None,
            ),
        )
    ),
)

# ----------------------------------------------------------------- context rules

#: Key words that make the value a password.
_PASSWORD_WORDS = frozenset(
    {
        "password",
        "passwd",
        "passphrase",
        "pwd",
        "pw",
        "pass",
        "passwort",
        "pword",
        "userpassword",
        "dbpassword",
        "mysqlpassword",
        "passcode",
        "pin",
    }
)
#: Key words that make the value a secret (token, key, credential).
_SECRET_WORDS = frozenset(
    {
        "secret",
        "secrets",
        "token",
        "apikey",
        "credential",
        "credentials",
        "auth",
        "bearer",
        "privatekey",
        "accesskey",
        "secretkey",
        "clientsecret",
        "signature",
        "sig",
        "salt",
        "cred",
        "creds",
        "sessionid",
        "cookie",
        "jwt",
        "otp",
        "totp",
        "seed",
        "mnemonic",
        "encryptionkey",
        "signingkey",
        "masterkey",
        "license",
        "licensekey",
        "activationkey",
        "srt",
        "sercret",
        "secert",
        "sekret",
    }
)
#: Two-word combinations that are secrets (``api key``, ``access key``...).
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("private", "key"),
        ("client", "secret"),
        ("app", "secret"),
        ("auth", "key"),
        ("api", "token"),
        ("access", "token"),
        ("refresh", "token"),
        ("session", "key"),
        ("encryption", "key"),
        ("signing", "key"),
        ("master", "key"),
        ("activation", "key"),
        ("license", "key"),
        ("account", "key"),
        ("storage", "key"),
        ("shared", "key"),
        ("consumer", "secret"),
        ("x", "api"),
    }
)
#: If the key ends in one of these words it names metadata, not the secret.
_META_WORDS = frozenset(
    {
        "id",
        "ids",
        "name",
        "names",
        "path",
        "file",
        "files",
        "dir",
        "url",
        "uri",
        "urls",
        "endpoint",
        "length",
        "len",
        "size",
        "type",
        "types",
        "count",
        "timeout",
        "format",
        "field",
        "prompt",
        "env",
        "var",
        "header",
        "enabled",
        "required",
        "policy",
        "hint",
        "label",
        "placeholder",
        "mode",
        "min",
        "max",
        "limit",
        "version",
        "ttl",
        "expiry",
        "expires",
        "expiration",
        "expire",
        "reset",
        "manager",
        "store",
        "provider",
        "location",
        "ref",
        "arn",
        "template",
        "budget",
        "usage",
        "used",
        "index",
        "pattern",
        "regex",
        "rule",
        "rules",
        "strength",
        "validation",
        "validator",
        "changed",
        "change",
        "prefix",
        "suffix",
        "message",
        "msg",
        "error",
        "errors",
        "flag",
        "status",
        "description",
        "desc",
        "help",
        "title",
        "text",
        "kind",
        "class",
        "schema",
        "method",
        "scheme",
        "key",
        "storage",
        "column",
        "table",
        "input",
        "button",
        "form",
        "page",
        "link",
        "callback",
        "handler",
        "request",
        "response",
        "params",
        "param",
        "option",
        "options",
        "config",
        "setting",
        "settings",
        "source",
        "algorithm",
        "alg",
        "encoding",
        "digest",
        "hash",
        "hashed",
        "filter",
        "list",
        "lifetime",
        "age",
        "interval",
        "duration",
        "generator",
        "factory",
        "mask",
    }
)
_DEFINITELY_NOT = frozenset(
    {
        "author",
        "authors",
        "authority",
        "authenticate",
        "authentication",
        "authenticated",
        "authorize",
        "authorized",
        "authorizer",
        "tokenizer",
        "tokens",
        "tokenize",
        "tokenized",
        "passenger",
        "passengers",
        "passport",
        "bypass",
        "compass",
        "passthrough",
        "passive",
        "keyboard",
        "keyword",
        "keywords",
        "secretary",
        "pinned",
        "pins",
        "surpass",
        "overpass",
        "underpass",
        "trespass",
        "encompass",
        "multipass",
        "onepass",
        "twopass",
        "firstpass",
        "secondpass",
        "singlepass",
        "renderpass",
        "subpass",
        "highpass",
        "lowpass",
        "bandpass",
        "allpass",
    }
)
#: Spellings and misspellings of "password": pswd, psswrd, pasword, paasword,
#: passworsd, passowrd...
_PASSWORD_LIKE = re.compile(r"pa*s+(?:wo?r?s?d|owr?d)s?")
#: Word endings that make a compound word a password (``mysqlpass``, ``dbpwd``).
_PASSWORD_ENDINGS = ("pass", "passwd", "pwd", "pswd")

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def key_words(key: str) -> list[str]:
    """Split an identifier into lower-case words (snake, kebab, dotted, camel)."""
    words: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", key):
        if part:
            words.extend(w.lower() for w in _CAMEL.findall(part))
    return words


def _password_word(word: str) -> bool:
    """``pswd``, ``paasword``, ``mysqlpass``, ``dbpwd``: a (mis)spelt password."""
    if _PASSWORD_LIKE.fullmatch(word):
        return True
    return (
        len(word) > 4
        and word.endswith(_PASSWORD_ENDINGS)
        and (word not in _DEFINITELY_NOT)
    )


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
    if any(w in _PASSWORD_WORDS or _password_word(w) for w in words) or (
        "password" in joined
    ):
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
    {
        "none",
        "null",
        "nil",
        "true",
        "false",
        "undefined",
        "empty",
        "n/a",
        "na",
        "todo",
        "tbd",
        "xxx",
        "str",
        "string",
        "int",
        "integer",
        "bool",
        "boolean",
        "bytes",
        "optional",
        "required",
        "redacted",
        "masked",
        "hidden",
        "secret",
        "password",
        "passwd",
        "token",
        "apikey",
        "api_key",
        "value",
        "example",
        "sample",
        "dummy",
        "test",
        "testing",
        "changeme",
        "placeholder",
        "default",
        "unknown",
        "unset",
        "missing",
        "invalid",
        "incorrect",
        "wrong",
        "expired",
        "public",
        "private",
        "yes",
        "no",
        "on",
        "off",
        "env",
        "any",
        "object",
        "dict",
        "list",
        "self",
        "this",
        "new",
        "get",
        "set",
        "prompt",
        "input",
        "foo",
        "bar",
        "foobar",
        "baz",
        "sha256",
        "md5",
        "bcrypt",
        "hash",
        "type",
        "key",
        "secret_key",
    }
)
_PLACEHOLDER_MARKERS = (
    "your",
    "example",
    "placeholder",
    "redacted",
    "changeme",
    "xxxx",
    "****",
    "<",
    ">",
    "${",
    "{{",
    "}}",
    "%(",
    "$(",
    "process.env",
    "os.environ",
    "getenv",
    "environ[",
    "secrets.",
    "vault:",
    "...",
    "…",
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
    if entropy < entropy_floor(len(value), min_entropy):
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


def entropy_floor(length: int, min_entropy: float) -> float:
    """The entropy a value of ``length`` characters must reach.

    A string of n characters has at most log2(n) bits per character: 3.17 for 9
    characters, so a 3.0 floor rejects a 9-character key with a single repeated
    letter (``GEHEIMN1S``: 2.95) although it is as random as 9 characters get.
    Short values are held to their own maximum less a quarter bit instead;
    from 10 characters on the configured floor applies unchanged.
    """
    if length < 2:
        return min_entropy
    return min(min_entropy, math.log2(length) - 0.25)


_QUOTE = r"(?:\\?[\"'`]|&quot;)"
_KEY = r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}"
#: A quoted value's character: no quote or space; ``&`` only when it does not start
#: an escaped quote (``&quot;``), so ``"MYPSWRD!@#$%^&*"`` and HTML-escaped values
#: (``&quot;Dw7^&amp;amp;nd&quot;``) are whole.
_QCHAR = r"(?:[^\s\"'`\\<>&]|&(?!quot;|#34;|#39;|apos;))"
#: A bare value's character: ``&`` ends it before the next ``name=`` of a query
#: string (``X-Amz-Credential=...&X-Amz-Key=...``), not inside ``Tr0ub4dor&3x``.
_UCHAR = r"(?:[^\s\"'`\\,;<>()\[\]{}&]|&(?![A-Za-z_][\w.\-]{0,40}=))"
#: A type annotation between key and value: ``passwd: str = "..."``,
#: ``val password: String = "..."``, ``token: Optional[str] = "..."``.
_TYPED = (
    r"\s*:\s*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,40}\])?(?:\s*\|\s*[A-Za-z_][\w.]*)*"
    r"\s*=(?!=)\s*"
)
#: ``key <sep> value``: key optionally quoted, ``=``, ``:``, ``:=``, ``=>``, ``==``,
#: ``->``, a typed ``: T =``, `` is ``/`` are `` (prose), or plain spaces before a
#: quoted value (``#define password "..."``). The value is quoted or a bare token.
_ASSIGN_RE = re.compile(
    r"(?<![A-Za-z0-9_])(?P<kq>" + _QUOTE + r")?(?P<key>" + _KEY + r")(?P=kq)?"
    r"(?:(?P<typed>" + _TYPED + r")|\s*(?::=|=>|==|!=|->|=|:)\s*"
    r"|\s+(?:is|are|was)\s+|(?P<ws>[ \t]+)(?=" + _QUOTE + r"))"
    r"(?:(?P<q>" + _QUOTE + r")(?P<qval>" + _QCHAR + r"{1,4096}?)(?P=q)"
    r"|(?P<val>" + _UCHAR + r"{1,4096}))"
)
#: ``password Prl23Db#@``, ``LOGIN PASSWORD SqLpa5sW0rD;``, ``PASSWORD(x)``: a
#: keyword, then spaces or an opening parenthesis, then a bare value (the value
#: must look like a credential; see ``_credential_like``).
_LOOSE_RE = re.compile(
    r"(?P<sep>[ \t]+|[ \t]*\([ \t]*)"
    r"(?P<val>[^\s\"'`<>()\[\]{},;]{6,128})(?=[\s)\],;]|$)"
)
_KEY_ONLY_RE = re.compile(_KEY)
#: One word between a keyword and its value (``api-key xxx <value>``, ``secret
#: 암호화 <value>``); ``_bridge_word`` says which words may sit there.
_BRIDGE_RE = re.compile(r"[ \t]+(?P<word>[^\s\"'`<>()\[\]{},;]{1,16})(?=[ \t])")
_BRIDGE_WORDS = frozenset({"value", "here", "is", "was", "example", "sample"})
_MASK_CHARS = frozenset("xX*.-_#")


def _bridge_word(word: str) -> bool:
    """Whether ``word`` may stand between a keyword and its value: a mask
    (``xxx``, ``***``), a filler (``value``, ``here``) or a word in another
    script (a translation of the keyword). The value after it must then look
    generated on the strict terms (``_credential_like``)."""
    word = word.rstrip(":=")
    if not word:
        return False
    if set(word) <= _MASK_CHARS or word.lower() in _BRIDGE_WORDS:
        return True
    return not any(ch.isascii() for ch in word)


_PREV_WORD_RE = re.compile(r"([A-Za-z]{2,20})[ \t]+$")
#: ``<password>...</password>``, ``<token name="t">...</token>``.
_XML_RE = re.compile(
    r"<(?P<tag>[A-Za-z_][\w.\-:]{0,63})(?:\s[^<>]{0,300})?>(?P<body>[^<]{1,2048})"
    r"</(?P=tag)\s*>"
)
#: ``key="DbPassword" value="..."`` (.NET config) and ``{"name": "password",
#: "value": "..."}``.
_KEY_VALUE_RE = re.compile(
    r"(?i)\b(?:key|name)\s*[=:]\s*(?P<kq>\\?[\"'])(?P<key>[\w.\-]{1,64})(?P=kq)"
    r"\s*,?\s*\\?[\"']?value\\?[\"']?\s*[=:]\s*(?P<q>\\?[\"'])"
    r"(?P<val>[^\"'\s<>\\]{1,512})(?P=q)"
)
#: The default of an environment lookup: ``getenv("DB_PASSWORD", "x")``.
_GETENV_RE = re.compile(
    r"(?:getenv|environ\.get|env\.get|getProperty|get_env|Getenv|ENV\.fetch)"
    r"\(\s*(?P<kq>\\?[\"'])?(?P<key>[\w.\-]{1,64})(?P=kq)?\s*,\s*b?"
    r"(?P<q>\\?[\"'])(?P<val>[^\"'\\\n]{1,256})(?P=q)"
)
#: After ``key = getenv(`` (value is a lookup): a default argument or ``or "x"``.
_ARG_DEFAULT_RE = re.compile(
    r"\(\s*(?:[^(),\n]|\([^()\n]*\)){1,100}?,\s*b?(?P<q>\\?[\"'])"
    r"(?P<val>[^\"'\\\n]{1,256})(?P=q)\s*\)"
)
_OR_DEFAULT_RE = re.compile(
    r"\((?:[^()\n]|\([^()\n]*\)){0,120}\)\s*(?:or|\|\||\?\?|\?:)\s*"
    r"(?P<q>[\"'])(?P<val>[^\"'\n]{1,256})(?P=q)"
)
_GETTERS = ("getenv", "get", "getProperty", "get_env", "Getenv", "fetch", "env")
#: Password words of other languages (no ASCII key pattern covers them).
_INTL_RE = re.compile(
    r"(?i)(?P<key>비밀번호|비번|패스워드|암호|토큰|пароль|密码|パスワード|contraseña|"
    r"mot de passe|senha|kennwort)(?:[ \t]*[:=(：][ \t]*|[ \t]*(?:은|는)[ \t]*|[ \t]+)"
    r"(?P<val>[^\s\"'`<>()\[\]{},;]{4,128})"
)
_KEY_PREFIX = re.compile(r"[A-Za-z_][\w.\-]*[:=]")
_HEX_LITERAL = re.compile(r"0[xX][0-9a-fA-F]+")
_PATHISH = re.compile(r"[\w.\-]*/[\w.\-/]*\.[A-Za-z]{1,5}$")
_KEBAB_LOWER = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)+")
_VERSION = re.compile(r"v?\d+(?:\.\d+)+[\w.\-+]*")


_SEQUENCES = (
    "abcdefghijklmnopqrstuvwxyz",
    "zyxwvutsrqponmlkjihgfedcba",
    "0123456789",
    "9876543210",
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
)


def has_sequence(value: str, run: int = 5) -> bool:
    """Whether ``value`` holds a run of ``run`` keyboard or alphabet neighbours
    (``KLMNO``, ``12345``, ``qwert``): the mark of a hand-made sample key."""
    low = value.lower()
    for i in range(len(low) - run + 1):
        piece = low[i : i + run]
        if piece.isalnum() and any(piece in seq for seq in _SEQUENCES):
            return True
    return False


def _credential_like(value: str, family: str, strict: bool) -> bool:
    """Whether a value that only *follows* a keyword (no ``=``/``:``) is one.

    Prose puts many words after "password" or "token", so the value must look
    generated: letters and digits for a password (three character classes when
    ``strict``), three classes, a long hex string, or a long high-entropy run for a
    secret. Resource names (``db-creds-v2``) and versions are not.
    """
    if not 6 <= len(value) <= 128 or value[0] in "-#":
        return False
    if _KEY_PREFIX.match(value):
        return False  # "KEY:abc123": the next key, not this keyword's value
    if _KEBAB_LOWER.fullmatch(value) or _VERSION.fullmatch(value):
        return False
    if _HEX_LITERAL.fullmatch(value) or _PATHISH.search(value):
        return False  # "#define PASSWORD 0x0dead1beef", "a/x b/tests/secrets_x.py"
    if family == "SECRET" and has_sequence(value):
        return False
    lower = any(ch.islower() for ch in value)
    upper = any(ch.isupper() for ch in value)
    digit = _has_digit(value)
    symbol = any(not ch.isalnum() for ch in value)
    classes = lower + upper + digit + symbol
    if family == "PASSWORD" and not strict:
        return (digit and (lower or upper)) or classes >= 3
    if classes >= 3:
        return True
    if _hex_only(value) and len(value) >= 32:
        return True
    return len(value) >= 20 and classes >= 2 and shannon_entropy(value) >= 3.5


_CLI_RE = re.compile(
    r"(?:^|(?<=\s))--?(?P<key>[A-Za-z][A-Za-z0-9_\-]{1,40})(?:\s+|=)(?!-)"
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
#: ``mysql -u root -pS3cret`` (attached: ``-p db`` prompts and names a database)
_MYSQL_P_RE = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]{0,200}?\s-p"
    r"(?P<q>[\"']?)(?P<value>[^\s\"'\-][^\s\"']{2,255})(?P=q)"
)
#: ``sshpass -p x``, ``docker login -u u -p x``
_LOGIN_P_RE = re.compile(
    r"\b(?:sshpass|(?:docker|podman|nerdctl|buildah)\s+login|helm\s+registry\s+login)"
    r"\b[^\n|;&]{0,200}?\s-p\s+(?P<q>[\"']?)(?P<value>[^\s\"'\-][^\s\"']{2,255})(?P=q)"
)
_SQL_RE = re.compile(
    r"(?i)\bidentified\s+(?:with\s+[\"'`]?\w+[\"'`]?\s+)?(?:by|as)\s+"
    r"(?:password\s+)?(?P<q>[\"'`]?)(?P<value>[^\s\"'`;]{3,256})(?P=q)"
    r"|\b(?:encrypted\s+|unencrypted\s+)?password\s*\(?\s*(?P<q2>[\"'])"
    r"(?P<value2>[^\s\"']{3,256})(?P=q2)"
)
_SECURE_STRING_RE = re.compile(
    r"(?i)ConvertTo-SecureString\s+(?:-String\s+)?(?:-AsPlainText\s+)?(?:-Force\s+)?"
    r"(?:\\?[\"'])?(?P<value>[^\s\"'\\]{4,256})"
)
#: A secret told in prose: ``my password is adminpass``, ``PIN: 4821``, ``the API
#: key was sk3kd93``, ``Passcode = 839201``. The key is one of a few unambiguous
#: words (not ``pass`` or ``key`` alone), the separator ``is``/``was``/``:``/``=``.
_PROSE_RE = re.compile(
    r"(?i)(?<![\w\-])(?P<key>pass(?:word|code|phrase|wd)s?|pwd|pw"
    r"|pin(?:[ \t]?(?:code|number))?"
    r"|api[ _\-]?key|(?:(?:access|auth|api|bearer|session|refresh|user)[ _\-])?token"
    r"|secret(?:[ _\-]key)?)"
    r"(?:[ \t]+(?:is|was)(?:[ \t]*[:=])?[ \t]+|[ \t]*[:=][ \t]*)"
    r"(?P<q>[\"'`\u201c\u2018]?)(?P<val>[^\s\"'`\u201c\u201d\u2018\u2019<>()\[\]{},;]{3,128})"
)
_PROSE_HINTS = ("pass", "pwd", "pw", "pin", "key", "token", "secret")
_PIN_VALUE = re.compile(r"\d{4,8}|(?=[A-Za-z]*\d)[A-Za-z\d]{4,8}")


def prose_value_ok(key: str, value: str) -> bool:
    """Whether ``value`` told after a secret word in prose is the secret.

    Unlike ``acceptable_value`` (built for code, where a lower-case word after
    ``password:`` is usually a type or a description), a plain word counts here
    unless it is an everyday English word (``required``, ``incorrect``, ``set``:
    ``common_english``) or a placeholder; so ``adminpass`` and ``user3pass`` are
    secrets and "the password is required" is not. PINs must be 4-8 digits (or
    digits and letters). Identifiers, references and URLs are left alone.
    """
    low = value.lower()
    kind = key.lower()
    if low in _PLACEHOLDER_VALUES or any(m in low for m in _PLACEHOLDER_MARKERS):
        return False
    if len(set(value)) <= 1 or value[0] in "$%@&*/.~-#":
        return False
    if value.startswith(("http://", "https://", "file:")):
        return False
    if _ENV_NAME.fullmatch(value) or _DOTTED.fullmatch(value):
        return False
    if _IDENT_SNAKE.fullmatch(value) or _KEBAB_LOWER.fullmatch(value):
        return False
    if kind.startswith("pin"):
        return _PIN_VALUE.fullmatch(value) is not None
    password = kind.startswith(("pass", "pw"))
    if value.isdigit():
        return len(value) >= (4 if password else 6)
    if _NUMBERISH.fullmatch(value) or _VERSION.fullmatch(value):
        return False
    if value.isalpha():
        if common_english(value):
            return False
        return len(value) >= (4 if password else 8)
    if not password and not (_has_digit(value) or _mixed(value)):
        return False
    if not password and shannon_entropy(value) < entropy_floor(len(value), 2.0):
        return False  # "AAAAaaa1": a made-up sample, not a token
    return len(value) >= (4 if password else 6)


#: Words of the common-password list that, after "the password is", describe
#: the password rather than being it ("the password is hidden").
_STATE_WORDS = frozenset({"hidden", "private"})
_TOLD = re.compile(r"(?i)\b(?:is|was)\b")


@cache
def _common_passwords() -> frozenset[str]:
    """The 30,000 most used passwords (zxcvbn's list, from real leaks).

    ``password``, ``admin``, ``letmein``, ``dragon`` are everyday words or
    placeholders everywhere else, so ``prose_value_ok`` lets them pass; told
    as a password ("my password is password") they are the secret itself.
    The list holds no state words (``required``, ``incorrect``, ``expired``),
    so "the password is required" stays text.
    """
    from zxcvbn.frequency_lists import FREQUENCY_LISTS  # noqa: PLC0415

    return frozenset(FREQUENCY_LISTS["passwords"]) - _STATE_WORDS


def common_password_told(key: str, separator: str, value: str) -> bool:
    """Whether ``value`` is a well-known password told as one ("my password is
    admin", "the PIN was 1234"): a password word, then ``is``/``was``."""
    if not key.lower().startswith(("pass", "pw", "pin")):
        return False
    if not _TOLD.search(separator):
        return False  # "password: string" in code is a type, not a value
    return value.lower() in _common_passwords()


def prose_secrets(text: str) -> Iterator[tuple[str, int, int]]:
    """``(family, start, end)`` of each secret told in prose (``_PROSE_RE``)."""
    for m in _PROSE_RE.finditer(text):
        key = m.group("key")
        quoted = bool(m.group("q"))
        start, end = m.span("val")
        value = m.group("val")
        if not quoted:
            stripped = value.rstrip(".,:?")
            if text[end : end + 1] == "(":
                continue  # a call: "password = get_password()"
            end -= len(value) - len(stripped)
            value = stripped
        elif value[-1:] in ".,:!?" and text[end : end + 1] not in "\"'`\u201d\u2019":
            value = value.rstrip(".,:!?")
            end = start + len(value)
        separator = text[m.end("key") : m.start("val")]
        if len(value) < 3 or not (
            prose_value_ok(key, value) or common_password_told(key, separator, value)
        ):
            continue
        low = key.lower()
        family = "PASSWORD" if low.startswith(("pass", "pw", "pin")) else "SECRET"
        yield family, start, end


_LONG_RUN = re.compile(r"[A-Za-z0-9_\-+/=.~:$|%]{16,}")
_PRAGMA_RE = re.compile(r"pragma:\s*(?:allowlist|whitelist)[ \-]secret", re.I)

#: Names the ``pii.secrets.recognizers`` switches accept.
RULE_NAMES = frozenset(
    {r.name for r in TOKEN_RULES}
    | {
        "aws_secret_key",
        "keyword_assignment",
        "auth_header",
        "url_credentials",
        "cli_password",
        "sql_password",
        "high_entropy",
        "prose",
    }
)

#: Cheap case-insensitive pre-screen for the context rules.
_CONTEXT_HINTS = (
    "pass",
    "pwd",
    "pw",
    "psw",
    "pasw",
    "paas",
    "secret",
    "sercret",
    "secert",
    "sekret",
    "token",
    "key",
    "auth",
    "bearer",
    "cred",
    "://",
    " -p",
    "identified",
    "securestring",
    "-u ",
    "--user",
    "sig",
    "salt",
    "cookie",
    "session",
    "otp",
    "seed",
    "pin",
    "srt",
    "jwt",
    "license",
)


#: The same for password words of other languages (non-ASCII texts only).
_INTL_HINTS = (
    "비밀번호",
    "비번",
    "패스워드",
    "암호",
    "토큰",
    "пароль",
    "密码",
    "パスワード",
    "contraseña",
    "senha",
    "kennwort",
    "mot de passe",
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
                k
                for k, on in settings.recognizers.items()
                if not on  # type: ignore[attr-defined]
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
        self._high_entropy = self._want("SECRET", "high_entropy")

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
        runs = (
            _LONG_RUN.findall(text) if self._token_rules or self._high_entropy else []
        )
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
                        match.start(),
                        match.end(),
                        rule.entity_type,
                        rule.score,
                        f"secret:{rule.name}",
                    )
                )
        if self._high_entropy and runs and any(len(r) >= _HE_MIN for r in runs):
            out.extend(
                Detection(a, b, "SECRET", 0.6, "secret:high_entropy")
                for a, b in high_entropy_tokens(text)
            )
        if self._context:
            lowered = text.lower()
            if any(hint in lowered for hint in _CONTEXT_HINTS) or (
                not text.isascii() and any(h in lowered for h in _INTL_HINTS)
            ):
                out.extend(self._context_rules(text, lowered))
        if out and self.config.honor_allowlist_pragma and "pragma" in text:
            out = [d for d in out if not _allowlisted(text, d.start)]
        if out:
            out.extend(_repeats(text, out))
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
            for family, key, start, end, quoted in _keyed_values(text, lowered):
                value = text[start:end]
                min_len, min_ent = cfg.thresholds(family)
                if acceptable_value(value, family, quoted, min_len, min_ent):
                    score = 0.8 if family != "WEAK" else 0.6
                    self._emit(
                        out, start, end, family, "keyword_assignment", score, key
                    )
        if "keyword_assignment" not in cfg.disabled and any(
            hint in lowered for hint in _PROSE_HINTS
        ):
            taken = [(d.start, d.end) for d in out]
            for family, start, end in prose_secrets(text):
                if not any(start < b and a < end for a, b in taken):
                    self._emit(out, start, end, family, "prose", 0.8)
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
        if "cli_password" not in cfg.disabled and " -p" in text:
            for regex in (_MYSQL_P_RE, _LOGIN_P_RE):
                for m in regex.finditer(text):
                    value = m.group("value")
                    quoted = bool(m.group("q"))
                    if acceptable_value(value, "PASSWORD", quoted, 3, 1.0):
                        self._emit(
                            out, *m.span("value"), "PASSWORD", "cli_password", 0.8
                        )
        if "securestring" in lowered and "cli_password" not in cfg.disabled:
            for m in _SECURE_STRING_RE.finditer(text):
                value = m.group("value")
                if acceptable_value(value, "PASSWORD", True, 4, 1.0):
                    self._emit(out, *m.span("value"), "PASSWORD", "cli_password", 0.85)
        return out


_KEY_HINT = re.compile(
    r"(?i)pass|pwd|pw|ps+w|pa+sw|secret|sercret|secert|sekret|token|key|auth|cred|"
    r"bearer|sig|salt|cookie|"
    r"session|otp|seed|pin|srt|jwt|license|mnemonic"
)
_KEY_HINT_LOWER = re.compile(_KEY_HINT.pattern.replace("(?i)", "", 1))
_IDENT_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
)


def _key_family(text: str, key: str, key_start: int) -> str | None:
    """``classify_key``, with a bare ``key`` upgraded by the word before it
    (``SECRET KEY:``, ``Activation key :``)."""
    family = classify_key(key)
    if family == "WEAK" and key.isalpha():
        prev = _PREV_WORD_RE.search(text, max(0, key_start - 24), key_start)
        if prev is not None:
            pair = classify_key(f"{prev.group(1)}_{key}")
            if pair in ("PASSWORD", "SECRET"):
                return pair
    return family


def _loose_key(key: str) -> bool:
    """A key that may name a value without ``=``/``:``: its last word is a
    password or secret word (``LOGIN PASSWORD x``, ``%define token x``), not a
    compound that merely contains one (``secrets_collection_test``)."""
    words = key_words(key)
    if not words:
        return False
    last = words[-1]
    return (
        last in _PASSWORD_WORDS
        or last in _SECRET_WORDS
        or last == "key"
        or _password_word(last)
    )


def _bare_value(
    text: str, value: str, start: int, end: int, family: str
) -> tuple[int, int] | None:
    """Trim trailing punctuation off a bare value; None for a call or an index."""
    stripped = value.rstrip(".,:!?" if family != "PASSWORD" else ".,:?")
    end -= len(value) - len(stripped)
    if text[end : end + 1] in ("(", "["):
        return None
    return start, end


def _lookup_default(text: str, pos: int, value: str) -> re.Match[str] | None:
    """For ``key = getenv(...)``: the literal default of the lookup, if any."""
    name = value.rsplit(".", 1)[-1]
    if name not in _GETTERS:
        return None
    return _ARG_DEFAULT_RE.match(text, pos) or _OR_DEFAULT_RE.match(text, pos)


def _xml_values(text: str, m: re.Match[str], family: str) -> Iterator[tuple[int, int]]:
    """Value spans of an XML element's text: one token, or (secrets) one per line
    of a wrapped token; surrounding quotes and blanks are not part of it."""
    body_start = m.start("body")
    body = m.group("body")
    pieces = [(lm.start(), lm.end()) for lm in re.finditer(r"[^\s\"']+", body)]
    if not pieces:
        return
    if len(pieces) > 1:
        if family == "PASSWORD" or body.count("\n") < len(pieces) - 1:
            return  # prose ("Password for authorization"), not a value
        if not all(re.fullmatch(r"[A-Za-z0-9+/=_\-.]+", body[a:b]) for a, b in pieces):
            return
    for a, b in pieces:
        yield body_start + a, body_start + b


def _keyed_values(text: str, lowered: str) -> Iterator[tuple[str, str, int, int, bool]]:
    """``(family, key, start, end, quoted)`` of each value a secret keyword names.

    Anchored at keyword hits (not a scan over every identifier), which is faster
    and never lets a harmless ``config: password=...`` swallow the real pair. At
    each hit, in order: ``key <sep> value`` (``_ASSIGN_RE``), an XML element named
    by the key, a lookup default (``PW = getenv("X", "dflt")``), and a loose
    ``keyword value`` whose value must look generated (``_credential_like``).
    """
    done = -1
    # the case-insensitive scan is several times faster on lower-cased text
    if len(lowered) == len(text):
        hits = _KEY_HINT_LOWER.finditer(lowered)
    else:  # a few letters lower-case to two characters: offsets would shift
        hits = _KEY_HINT.finditer(text)
    for hit in hits:
        start = hit.start()
        if start < done:
            continue
        while start > 0 and text[start - 1] in _IDENT_CHARS:
            start -= 1
        while start < hit.start() and text[start] in "-.":
            start += 1  # "-Password:x", "--pw:x": a flag dash is not the key
        key_start = start
        if start > 0 and text[start - 1] in "\"'`":
            start -= 1
            if start > 0 and text[start - 1] == "\\":
                start -= 1
        elif text.startswith("&quot;", max(0, start - 6)) and start >= 6:
            start -= 6
        if key_start > 0 and text[key_start - 1] == "<":
            xm = _XML_RE.match(text, key_start - 1)
            if xm is not None:
                tag = xm.group("tag").rsplit(":", 1)[-1]
                family = classify_key(tag)
                if family is not None:
                    for v_start, v_end in _xml_values(text, xm, family):
                        yield family, tag, v_start, v_end, True
                done = xm.end("tag")
                continue
        m = _ASSIGN_RE.match(text, start)
        if m is not None:
            done = m.end("key")
            key = m.group("key")
            family = _key_family(text, key, m.start("key"))
            if family is None:
                continue
            quoted = m.group("qval") is not None
            if quoted:
                if m.group("ws") is not None and not _credential_like(
                    m.group("qval"), family, False
                ):
                    continue
                yield family, key, *m.span("qval"), True
                continue
            value = m.group("val")
            if text[m.end("val") : m.end("val") + 1] == "(":
                dm = _lookup_default(text, m.end("val"), value)
                if dm is not None:
                    yield family, key, *dm.span("val"), True
                continue
            span = _bare_value(text, value, *m.span("val"), family)
            if span is not None:
                yield family, key, *span, False
            continue
        km = _KEY_ONLY_RE.match(text, key_start)
        if km is None:
            done = hit.end()
            continue
        done = km.end()
        lm = _LOOSE_RE.match(text, km.end())
        bridged = False
        if lm is None or _bridge_word(lm.group("val")):
            bm = _BRIDGE_RE.match(text, km.end())
            if bm is not None and _bridge_word(bm.group("word")):
                lm = _LOOSE_RE.match(text, bm.end())
                bridged = True
        if lm is None:
            continue
        key = km.group(0)
        if "." in key or not _loose_key(key):
            continue
        family = _key_family(text, key, key_start)
        if family not in ("PASSWORD", "SECRET"):
            continue
        value = lm.group("val")
        span = _bare_value(text, value, *lm.span("val"), family)
        if span is None:
            continue
        value = text[span[0] : span[1]]
        strict = (
            bridged or "(" in lm.group("sep") or key.lower() in ("pass", "pw", "pin")
        )
        if _credential_like(value, family, strict):
            yield family, key, *span, False
    if "value" in lowered:
        for m in _KEY_VALUE_RE.finditer(text):
            family = classify_key(m.group("key"))
            if family is not None:
                yield family, m.group("key"), *m.span("val"), True
    if "env" in lowered or "getproperty" in lowered:
        for m in _GETENV_RE.finditer(text):
            family = classify_key(m.group("key"))
            if family in ("PASSWORD", "SECRET"):
                yield family, m.group("key"), *m.span("val"), True
    if not text.isascii():
        for m in _INTL_RE.finditer(text):
            value = m.group("val")
            span = _bare_value(text, value, *m.span("val"), "PASSWORD")
            family = "SECRET" if m.group("key") == "토큰" else "PASSWORD"
            if span is not None and _credential_like(
                text[span[0] : span[1]], family, False
            ):
                yield family, m.group("key"), *span, False


# ------------------------------------------------------ keyword-less high entropy

_HE_MIN = 32
#: A standalone base64/base64url run of 32-100 characters (not part of a longer
#: token, a path, a dotted name or a URL-encoded string).
_HE_RE = re.compile(
    r"(?<![A-Za-z0-9+/_\-.%\\])[A-Za-z0-9+/_\-]{32,100}={0,2}"
    r"(?![A-Za-z0-9+/=_\-.%])"
)
_HE_PREFIX = re.compile(r"[a-z]{2,12}[_\-]|sha\d|md5|[A-Za-z]+://")
_HE_PRINTABLE = re.compile(rb"[\t\n\r -~]+")
_B64_LINE = re.compile(r"[ \t]*[A-Za-z0-9+/]{40,}={0,2}[ \t]*")


def _b64_kind(value: str) -> str:
    """What base64 ``value`` decodes to: ``"hex"`` (``!!binary`` of a hex secret),
    ``"text"`` (encoded prose, JSON or headers, not a key; also a piece cut out
    of a longer encoded text at any alignment) or ``"binary"``."""
    raw = value.replace("-", "+").replace("_", "/").rstrip("=")
    for offset in range(4):
        piece = raw[offset:]
        piece = piece[: len(piece) // 4 * 4]
        try:
            decoded = base64.b64decode(piece, validate=True)
        except (binascii.Error, ValueError):
            return "binary"
        if offset == 0 and re.fullmatch(rb"[0-9a-fA-F]{16,}", decoded):
            return "hex"
        # random bytes hold a 10-byte printable run at ~1% of tokens
        if any(len(run) >= 10 for run in _HE_PRINTABLE.findall(decoded)):
            return "text"
    return "binary"


def _in_wrapped_block(text: str, start: int, end: int) -> bool:
    """Whether the token is one line of a wrapped base64 block (a certificate,
    an embedded file): the lines above or below are base64 too."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    if text[line_start:start].strip() or text[end:line_end].strip():
        return False
    if line_start > 0:
        prev_start = text.rfind("\n", 0, line_start - 1) + 1
        if _B64_LINE.fullmatch(text, prev_start, line_start - 1):
            return True
    if line_end < len(text):
        next_end = text.find("\n", line_end + 1)
        next_end = len(text) if next_end < 0 else next_end
        if _B64_LINE.fullmatch(text, line_end + 1, next_end):
            return True
    return False


def _char_class(ch: str) -> int:
    if ch.islower():
        return 0
    if ch.isupper():
        return 1
    return 2 if ch.isdigit() else 3


def switch_ratio(value: str) -> float:
    """Share of neighbouring characters of different classes (lower, upper,
    digit, other): ~0.65 for random base64, ~0.3 for ``CamelCaseNames2024``."""
    if len(value) < 2:
        return 0.0
    classes = [_char_class(ch) for ch in value]
    switches = sum(a != b for a, b in zip(classes, classes[1:], strict=False))
    return switches / (len(value) - 1)


def high_entropy_tokens(text: str) -> list[tuple[int, int]]:
    """Spans of keyword-less random-looking tokens (``mimi=gX69YO4C...``).

    Conservative, because agent text is full of ids and hashes: upper case, lower
    case and digits, Shannon entropy >= 4.2 bits per character, no hex (hashes,
    commit ids, UUIDs), frequent switches between character classes (not
    ``CamelCaseNames2024``), no ``word_``/``word-`` prefix (``chatcmpl-...``,
    vendor formats have their own rules), no path pieces (``__``, ``/x/y``), not
    base64 of readable text, not a line of a wrapped base64 block.
    """
    out = []
    for m in _HE_RE.finditer(text):
        value = m.group(0)
        core = value.rstrip("=")
        if not (
            any(ch.islower() for ch in core)
            and any(ch.isupper() for ch in core)
            and _has_digit(core)
        ):
            continue
        if _hex_only(core.replace("-", "")) or "__" in core or _HE_PREFIX.match(core):
            continue
        if core.count("/") > 2 or core.startswith("/") or core.count("-") > 3:
            continue
        if len(value) in (64, 76) and ("+" in value or "/" in value):
            continue  # the line width of wrapped base64 (signatures, certificates)
        if switch_ratio(core) < 0.45 or has_sequence(core):
            continue
        if _in_wrapped_block(text, m.start(), m.end()):
            continue
        kind = _b64_kind(core)
        if kind == "text" or shannon_entropy(core) < (3.8 if kind == "hex" else 4.2):
            continue
        out.append(m.span())
    return out


#: Types whose value a keyword named (not a self-identifying format).
_KEYED_TYPES = frozenset({"PASSWORD", "SECRET", "AWS_SECRET_KEY"})
_MAX_REPEATED_VALUES = 64


def _token_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def _repeats(text: str, found: list[Detection]) -> list[Detection]:
    """Other occurrences of a keyword-named secret value in the same text.

    ``password: Prl23Db#@`` makes every other standalone ``Prl23Db#@`` in the text
    the same password (``root/Prl23Db#@``, a log line echoing it): one placeholder
    for all of them, or the value survives next to its own placeholder.
    """
    spans = {(d.start, d.end) for d in found}
    values: dict[str, str] = {}
    for d in found:
        if d.entity_type not in _KEYED_TYPES or d.end - d.start < 6:
            continue
        value = text[d.start : d.end]
        if value.isalpha() or value in values:
            continue
        values[value] = d.entity_type
        if len(values) >= _MAX_REPEATED_VALUES:
            break
    out: list[Detection] = []
    for value, etype in values.items():
        pos = text.find(value)
        while pos >= 0:
            end = pos + len(value)
            if (
                (pos, end) not in spans
                and not (pos > 0 and _token_char(text[pos - 1]))
                and not (end < len(text) and _token_char(text[end]))
            ):
                out.append(Detection(pos, end, etype, 0.75, "secret:repeated_value"))
            pos = text.find(value, end)
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
