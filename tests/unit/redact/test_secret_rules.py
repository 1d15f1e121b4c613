"""Table tests for the keyword, token and high-entropy secret rules added for recall.

Every value is a fake built here from repeated or shuffled pieces; each rule has
true positives (the exact value span is found with the expected type) and true
negatives (prose, code and log lines that must stay untouched).
"""

from __future__ import annotations

import pytest

from ctxledger.pipelines.redact.secrets import (
    SecretConfig,
    SecretDetector,
    classify_key,
    entropy_floor,
    find_secrets,
    has_sequence,
    high_entropy_tokens,
    switch_ratio,
)

PW = "dipPr" + "18" + "Gg!"  # the shape of a hand-typed password
TOKEN = "AIhq5" + "Xyb1" + "Gga9Q7"
B64_40 = "gX69YO4CvBsVjzAw" + "YxdGyDd30t5+9ez3" + "1gKATtj4"
HEX_64 = "4b9a6d8b4bc56fbf" * 4
GL_RUNNER = "glrt-" + "2CR8_eVxiio" + "-1QmzPZwa"
GL_WORKSPACE = "glwt-" + "G9dr9LJjGiSf" + "BdxzDVyHi7vSdDcAftOmJ"
GL_REGISTRATION = "GR1348941" + "jG6xeSsmN8DFVKoyBYu2"
GL_SESSION = "8d2a78c0" * 4
WHSEC = "whsec_" + "IsQVcHgjVWTB" + "wlClIsICTD0mpDr4gJ4m"
GHS_DATED = "ghs_20260523_" + "eyJhbGciOiJSUzI1NiJ9" + ".eyJpYXQiOjE3fQ.c2ln"
TOKEN_B = "Qm7vT" + "2pLx9" + "Rk4Wz"
SHORT_KEY = "BLAU" + "MEER7"  # 9 characters, one letter twice: 2.95 bits/char
DER_KEY = "MIIBOgIBAAJBAJtFfagSXdo0" + "JmX6EdwWGvFMaXeOFY5xOTs3PWsn" + "hRFakQFbAuI"


def _found(text: str) -> list[tuple[str, str]]:
    return [(d.entity_type, text[d.start : d.end]) for d in find_secrets(text)]


@pytest.mark.parametrize(
    ("text", "etype", "value"),
    [
        # keyword, then a separator the old rule did not know
        (f"ID:master PW:{PW}", "PASSWORD", PW),
        (f"-Username:master -Password:{PW}", "PASSWORD", PW),
        (f"user master password {PW}", "PASSWORD", PW),
        (f"PASSWORD({PW})", "PASSWORD", PW),
        (f"CREATE ROLE app WITH LOGIN PASSWORD {PW};", "PASSWORD", PW),
        (f'val password: String = "{PW}", // scala', "PASSWORD", PW),
        (f'def connect(passwd: str = "{PW}"):', "PASSWORD", PW),
        (f'#define password "{PW}"', "PASSWORD", PW),
        (f'SET password "{PW}"', "PASSWORD", PW),
        # misspelt and compound keys
        (f'if passworsd == "{PW}":', "PASSWORD", PW),
        (f"PSWRD:={PW}", "PASSWORD", PW),
        (f"X3_PSWD={PW}", "PASSWORD", PW),
        (f"MYSQLPASS: {PW}", "PASSWORD", PW),
        (f"-sercret {TOKEN}", "SECRET", TOKEN),
        # two-word keys and bare keyword + value
        (f"SECRET KEY:{TOKEN}", "SECRET", TOKEN),
        (f"Secret key {TOKEN}", "SECRET", TOKEN),
        (
            "Activation key : QWXZT-PLMRK-BNVCG-HJKTY-ZXRQW",
            "SECRET",
            "QWXZT-PLMRK-BNVCG-HJKTY-ZXRQW",
        ),
        (f"%define token {HEX_64}", "SECRET", HEX_64),
        # markup, lookups, quoting
        (f'<password name="password">{PW}</password>', "PASSWORD", PW),
        (f"<ID>master</ID> <PW>{PW}</PW>", "PASSWORD", PW),
        (f'<token name="t">\n    "{TOKEN}"\n</token>', "SECRET", TOKEN),
        (f'<add key="DbPassword" value="{PW}"/>', "PASSWORD", PW),
        (f'PASSWORD = os.environ.get("PASSWORD") or "{PW}"', "PASSWORD", PW),
        (f'db = os.getenv("DB_PASSWORD", "{PW}")', "PASSWORD", PW),
        ('password = "MYPSWRD!@#$%^&*"', "PASSWORD", "MYPSWRD!@#$%^&*"),
        (
            "Password: &quot;Dw7^&amp;amp;nd&amp;lt;dj&quot;",
            "PASSWORD",
            "Dw7^&amp;amp;nd&amp;lt;dj",
        ),
        (f"비밀번호:{PW}", "PASSWORD", PW),
        # query strings: the value ends before the next parameter
        (
            f"https://b.example.com/x?X-Amz-Credential=a%2Fb&X-Amz-Key={B64_40}",
            "SECRET",
            B64_40,
        ),
        # SQL and command lines
        (f"insert into mysql.user values(PASSWORD('{PW}'));", "PASSWORD", PW),
        (
            f"ALTER USER 't' IDENTIFIED WITH 'native' AS '*{HEX_64[:40]}'",
            "PASSWORD",
            f"*{HEX_64[:40]}",
        ),
        (f"gpg --decrypt --passphrase {PW} --output out.txt in.gpg", "PASSWORD", PW),
        (f"mysql -u root -p{PW} -e 'select 1'", "PASSWORD", PW),
        (f"sshpass -p {PW} ssh me@host", "PASSWORD", PW),
        (f"docker login -u bob -p {PW} registry.example.com", "PASSWORD", PW),
        # vendor formats
        (f"runner: {GL_RUNNER} # x", "GITLAB_TOKEN", GL_RUNNER),
        (f"{GL_WORKSPACE} # workspace", "GITLAB_TOKEN", GL_WORKSPACE),
        (f"{GL_REGISTRATION} # registration", "GITLAB_TOKEN", GL_REGISTRATION),
        (f"_gitlab_session={GL_SESSION} # cookie", "GITLAB_TOKEN", GL_SESSION),
        (f"STRIPE_WEBHOOK_SECRET={WHSEC}", "STRIPE_KEY", WHSEC),
        (f"token {GHS_DATED}", "GITHUB_TOKEN", GHS_DATED),
        (
            f"\x1b[93m{'sk-' + '615ef152bf865a13' * 2}\x1b[0m",
            "OPENAI_API_KEY",
            "sk-" + "615ef152bf865a13" * 2,
        ),
        (f"<data>\n    {DER_KEY}\n</data>", "PRIVATE_KEY", DER_KEY),
        # keyword-less random-looking tokens
        (f"mimi={B64_40}", "SECRET", B64_40),
        # a mask or a word of another script between keyword and value
        (f"ANY-api-key xxx {TOKEN_B}", "SECRET", TOKEN_B),
        (f"access token *** {TOKEN_B}", "SECRET", TOKEN_B),
        (f"secret 암호화 {TOKEN_B}", "SECRET", TOKEN_B),
        # a short value as random as its length allows
        (f'if SECRET := getenv("XQZ", "{SHORT_KEY}"):', "SECRET", SHORT_KEY),
        (f'api_token = "{SHORT_KEY}"', "SECRET", SHORT_KEY),
    ],
)
def test_new_true_positives(text: str, etype: str, value: str) -> None:
    found = _found(text)
    assert (etype, value) in found, found


@pytest.mark.parametrize(
    "text",
    [
        "The token limit is 4096 and each token costs money.",
        "kubectl get secret db-creds-v2 -o yaml",
        "Please pass the arg1 to the function.",
        "A password reset link was sent to your inbox.",
        "def check_password(password2):",
        "for token in tokens: print(token)",
        "if token in vocab:\n    pass\n",
        "The secret sauce is simplicity.",
        "Password must be at least 8 characters, e.g. Abcdefg1",
        "My password manager is 1Password7.",
        "#define PASSWORD 0x0dead1beef7cafe2",
        "diff --git a/tests/secrets_test.py b/tests/secrets_test.py",
        "mysql -u root -p mydb",
        "docker login -u bob -p $TOKEN registry.example.com",
        "mkdir -p build",
        "pass 1 of 3 complete",
        'if SECRET := getenv("NAME", "short"):',
        "<password>\n    Password for authorization\n</password>",
        "password: keep empty",
        "version v1.2.3-rc1 of the secret store",
        # high-entropy look-alikes that are not secrets
        "git commit " + "a1b2c3d4e5f6a7b8c9d0" * 2,
        "docker pull python@sha256:" + HEX_64,
        '{"id": "chatcmpl-8XyZabcDEF123ghiJKL456mnoPQR789st"}',
        "class TestHighEntropyStringDetector2024Alpha:",
        "cd /__home__alice__projects__LLM_CTF_Dataset_Dev__2015__CSAW-Quals",
        # base64 of prose, and a piece of a wrapped base64 block
        "payload: RXZpbCBDb3JwLCB3ZSBoYXZlIGRlbGl2ZXJlZCBvbiBvdXIgcHJvbWlzZSBh",
        "# UK3O3RhOJA/u0afRTK10MCAR6wfVVJUVSZQbQpKumFwwJtoAa+h7veyJBw/3DgSY",
        "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJ\n"
        "RTESMBAGA1UEChMJQmFsdGltb3JlMRMwEQYDVQQLEwpDeWJlclRydXN0MSIwIAYD",
        "api_key = os.getenv('OPENAI_API_KEY')",
        # bridge words with nothing generated after them
        "the api key xxx later on",
        "the token here is fine",
        "secret 암호화 abcdefgh",
        "token xxx 1.2.3-rc1",
        "the secret value is Mainframe",
        'api_token = "AAAAaaa1"',
    ],
)
def test_new_true_negatives(text: str) -> None:
    assert _found(text) == []


def test_repeated_value_is_redacted_everywhere() -> None:
    text = f"password:{PW}\nroot/{PW}, again {PW}.\nxx{PW}yy is part of a token"
    spans = {(d.start, d.end) for d in find_secrets(text)}
    starts = [i for i in range(len(text)) if text.startswith(PW, i)]
    assert len(starts) == 4
    for start in starts[:3]:
        assert (start, start + len(PW)) in spans
    assert not any(s <= starts[3] < e for s, e in spans)


def test_high_entropy_switch_can_be_disabled() -> None:
    det = SecretDetector(SecretConfig(disabled=frozenset({"high_entropy"})))
    assert det.detect(f"mimi={B64_40}") == []


@pytest.mark.parametrize(
    ("key", "family"),
    [
        ("PSWD", "PASSWORD"),
        ("paasword", "PASSWORD"),
        ("passowrd", "PASSWORD"),
        ("mysql_pass", "PASSWORD"),
        ("dbpwd", "PASSWORD"),
        ("sercret", "SECRET"),
        ("bypass", None),
        ("compass", None),
        ("passed", None),
        ("password_hint", None),
    ],
)
def test_classify_key_spellings(key: str, family: str | None) -> None:
    assert classify_key(key) == family


def test_entropy_floor_is_the_configured_one_from_ten_characters() -> None:
    assert entropy_floor(9, 3.0) < 3.0 < entropy_floor(10, 3.5)
    assert entropy_floor(10, 3.0) == entropy_floor(64, 3.0) == 3.0
    assert entropy_floor(1, 3.0) == 3.0


def test_helpers() -> None:
    assert has_sequence("ZAQWS-KLMNO") and has_sequence("x12345y")
    assert not has_sequence(TOKEN)
    assert switch_ratio(B64_40) > 0.45 > switch_ratio("TestHighEntropyString2024")
    assert high_entropy_tokens(f"a {B64_40} b") == [(2, 2 + len(B64_40))]
