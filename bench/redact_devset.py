"""Own PII dev data for redaction recall: ``python bench/redact_devset.py``.

Template sentences we wrote (presidio-research style, not its templates) filled
with ``Faker`` values from 24 locales (names, streets, cities, countries,
postcodes, cards, IBANs, SSNs, IPs, phones, e-mails at public and private
domains). Two seeded sets: ``dev`` (seed 1001; look at its errors) and
``measure`` (seed 2002; report it, never tune on it). Prints recall, precision
and verbatim survival per type with the default policy; ``--no-filter`` turns
the technical-text filter off; ``--show N`` prints N dev misses. Needs the
``dev`` extra (Faker). The held-out sets of issue 11 are not used here.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval.redaction import GOLD_MAP  # noqa: E402  (one label map for both)

LOCALES = [
    "en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "pt_BR", "pl_PL",
    "nl_NL", "tr_TR", "hi_IN", "vi_VN", "sv_SE", "cs_CZ", "ro_RO", "en_IN",
    "es_MX", "fi_FI", "da_DK", "hu_HU", "id_ID", "en_AU", "ga_IE", "no_NO",
]  # fmt: skip

TEMPLATES = [
    "My name is {PERSON} and I live in {GPE}.",
    "Please contact {PERSON} at {EMAIL_ADDRESS} regarding the invoice.",
    "{PERSON} called from {PHONE_NUMBER} yesterday.",
    "Ship the package to {STREET_ADDRESS}, {GPE} {ZIP_CODE}.",
    "The customer {PERSON} paid with card {CREDIT_CARD}.",
    "Transfer the money to IBAN {IBAN_CODE} by Friday.",
    "Her SSN is {US_SSN}.",
    "Login attempt from {IP_ADDRESS} was blocked.",
    "I met {PERSON} and {PERSON} at the conference in {GPE}.",
    "Dear {PERSON}, your order has shipped to {STREET_ADDRESS}.",
    "{PERSON}'s new address is {STREET_ADDRESS}, {GPE}.",
    "Can you book a table for {PERSON} tonight?",
    "Send the contract to {EMAIL_ADDRESS} and cc {EMAIL_ADDRESS}.",
    "we are moving to {GPE} next month, said {PERSON}",
    "The card ending in {CREDIT_CARD} was declined.",
    "Forward all mail to {STREET_ADDRESS}",
    "{PERSON} works remotely from {GPE}.",
    "My phone number is {PHONE_NUMBER}, call me after 5.",
    "Ask {PERSON} about the report; {PERSON} knows the numbers.",
    "The zip code for the office is {ZIP_CODE}.",
    "Reach me at {EMAIL_ADDRESS} or {PHONE_NUMBER}.",
    "Payment from {PERSON} ({IBAN_CODE}) is pending.",
    "I was born in {GPE} and grew up on {STREET_ADDRESS}.",
    "Hi {PERSON}, thanks for the update!",
    "The server at {IP_ADDRESS} belongs to {PERSON}.",
    "{PERSON} visited {GPE} twice; {PERSON} loved it.",
    "Please update the billing address to {STREET_ADDRESS}, {ZIP_CODE} {GPE}.",
    "Card number: {CREDIT_CARD}",
    "Name: {PERSON}\nEmail: {EMAIL_ADDRESS}\nPhone: {PHONE_NUMBER}",
    "Our new manager, {PERSON}, starts on Monday.",
    "Thanks {PERSON} for the help with the migration.",
    "Is {PERSON} still living at {STREET_ADDRESS}?",
    "The meeting with {PERSON} in {GPE} was moved.",
    "{PERSON} ({EMAIL_ADDRESS}) reported the bug.",
    "My social security number is {US_SSN} and my card is {CREDIT_CARD}.",
]
PRIVATE_DOMAINS = [
    "company.example",
    "corp.internal",
    "office.local",
    "acme.corp",
    "intra.lan",
    "mail.example",
]


def _value(fake: Any, kind: str, rnd: random.Random, us: Any) -> str:
    if kind == "PERSON":
        r = rnd.random()
        if r < 0.6:
            return fake.name()
        if r < 0.8:
            return fake.first_name()
        if r < 0.9:
            return f"{fake.first_name()} {fake.last_name()}"
        return fake.last_name()
    if kind == "GPE":
        return fake.city() if rnd.random() < 0.7 else fake.country()
    if kind == "EMAIL_ADDRESS" and rnd.random() < 0.3:
        return f"{fake.user_name()}@{rnd.choice(PRIVATE_DOMAINS)}"
    if kind == "IP_ADDRESS":
        return fake.ipv4() if rnd.random() < 0.8 else fake.ipv6()
    if kind == "US_SSN":
        return us.ssn()
    method = {
        "STREET_ADDRESS": "street_address",
        "ZIP_CODE": "postcode",
        "CREDIT_CARD": "credit_card_number",
        "IBAN_CODE": "iban",
        "PHONE_NUMBER": "phone_number",
        "EMAIL_ADDRESS": "email",
    }[kind]
    return getattr(fake, method)()


def build(seed: int, n: int) -> list[dict[str, Any]]:
    """``n`` labelled sentences (presidio-research JSON shape), seeded."""
    from faker import Faker  # noqa: PLC0415 - dev extra only

    rnd = random.Random(seed)
    fakers: dict[str, Any] = {}
    us = Faker("en_US")
    us.seed_instance(seed)
    out = []
    for _ in range(n):
        loc = rnd.choice(LOCALES)
        fake = fakers.setdefault(loc, Faker(loc))
        fake.seed_instance(rnd.randrange(1 << 30))
        template = rnd.choice(TEMPLATES)
        text, spans, pos = "", [], 0
        for m in re.finditer(r"\{(\w+)\}", template):
            text += template[pos : m.start()]
            value = _value(fake, m.group(1), rnd, us).replace("\n", ", ")
            spans.append((m.group(1), len(text), len(text) + len(value)))
            text += value
            pos = m.end()
        text += template[pos:]
        out.append({"text": text, "spans": spans, "locale": loc})
    return out


def measure(redactor: Any, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per-type recall/precision (span overlap, type must match) and survival."""
    start = time.time()
    dets = redactor.detect_batch([r["text"] for r in records])
    seconds = time.time() - start
    rows: dict[str, list[int]] = {}
    survived = values = 0
    misses = []
    for rec, found in zip(records, dets, strict=True):
        text = rec["text"]
        out = redactor._apply(text, "content", found, "dev").text  # noqa: SLF001
        gold = [(GOLD_MAP[k], a, b) for k, a, b in rec["spans"] if k in GOLD_MAP]
        for label, a, b in gold:
            row = rows.setdefault(label, [0, 0, 0])  # tp, fn, fp
            hit = any(
                d.entity_type == label and d.start < b and a < d.end for d in found
            )
            row[0 if hit else 1] += 1
            values += 1
            survived += text[a:b] in out
            if not hit:
                misses.append((rec["locale"], label, text[a:b], text))
        for d in found:
            if not any(
                d.entity_type == g and d.start < b and a < d.end for g, a, b in gold
            ):
                rows.setdefault(d.entity_type, [0, 0, 0])[2] += 1
    return {
        "rows": rows,
        "survival": survived / max(values, 1),
        "misses": misses,
        "per_second": len(records) / max(seconds, 1e-9),
    }


def _print(name: str, result: dict[str, Any]) -> None:
    print(f"{name}: survival {result['survival']:.3f}, {result['per_second']:.0f}/s")
    total = [0, 0, 0]
    for label, (tp, fn, fp) in sorted(result["rows"].items()):
        total = [total[0] + tp, total[1] + fn, total[2] + fp]
        _line(label, tp, fn, fp)
    _line("ALL", *total)


def _line(label: str, tp: int, fn: int, fp: int) -> None:
    recall = tp / max(tp + fn, 1)
    precision = tp / max(tp + fp, 1)
    print(f"  {label:<14} recall {recall:.3f}  precision {precision:.3f}  n {tp + fn}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1500, help="sentences per set")
    parser.add_argument("--no-filter", action="store_true")
    parser.add_argument("--show", type=int, default=0, help="dev misses to print")
    args = parser.parse_args(argv)
    from ctxledger.pipelines.redact.engine import Redactor  # noqa: PLC0415
    from ctxledger.schemas.policy import load_policy  # noqa: PLC0415

    if args.no_filter:
        from ctxledger.pipelines.redact import technical  # noqa: PLC0415

        technical.drop_technical = lambda text, dets: list(dets)
    redactor = Redactor(load_policy(None), b"devset-key-not-a-secret-00000000")
    redactor.setup()
    for name, seed in (("dev", 1001), ("measure", 2002)):
        result = measure(redactor, build(seed, args.n))
        _print(name, result)
        if name == "dev" and args.show:
            for miss in random.Random(0).sample(
                result["misses"], min(args.show, len(result["misses"]))
            ):
                print("   ", miss[:3])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
