"""Our anonymizer operators for presidio's ``AnonymizerEngine``.

Kept apart from ``pipelines.redact.recognizers`` (which imports presidio's
analyzer, and with it transformers and torch) so that the ``Redactor`` needs
only the anonymizer, imported light (``pipelines.redact.loading``).
"""

from __future__ import annotations

from ctxledger.pipelines.redact.decode import decode_value
from ctxledger.pipelines.redact.loading import import_anonymizer
from ctxledger.pipelines.redact.pseudonym import normalize_value

import_anonymizer()

from presidio_anonymizer.entities import InvalidParamError  # noqa: E402
from presidio_anonymizer.operators import Operator, OperatorType  # noqa: E402


class PseudonymOperator(Operator):
    """``<TYPE:hmac>`` via the ``Pseudonymizer`` and tenant given in params.

    ``aliases`` (optional, from ``pseudonym.person_aliases``) maps a normalised
    value to the longer value of the same text whose pseudonym it takes.
    """

    def operate(self, text: str = "", params: dict | None = None) -> str:  # noqa: D102
        assert params is not None
        etype = params["entity_type"]
        text = decode_value(text)  # "Szyma\\u0144ska" is "Szymańska"
        aliases = params.get("aliases")
        if aliases:
            text = aliases.get(normalize_value(etype, text), text)
        return params["pseudonymizer"].placeholder(params["tenant_id"], etype, text)

    def validate(self, params: dict | None = None) -> None:  # noqa: D102
        if not params or "pseudonymizer" not in params or "tenant_id" not in params:
            raise InvalidParamError("pseudonymizer and tenant_id are required")

    def operator_name(self) -> str:  # noqa: D102
        return "ctxledger_pseudonym"

    def operator_type(self) -> OperatorType:  # noqa: D102
        return OperatorType.Anonymize


class MaskOperator(Operator):
    """Overwrite all but the last ``keep_last`` characters with ``masking_char``."""

    def operate(self, text: str = "", params: dict | None = None) -> str:  # noqa: D102
        assert params is not None
        keep = min(int(params.get("keep_last", 0)), len(text))
        char = params.get("masking_char", "*")
        return char * (len(text) - keep) + (text[len(text) - keep :] if keep else "")

    def validate(self, params: dict | None = None) -> None:  # noqa: D102
        char = (params or {}).get("masking_char", "*")
        if not isinstance(char, str) or len(char) != 1:
            raise InvalidParamError("masking_char must be one character")

    def operator_name(self) -> str:  # noqa: D102
        return "ctxledger_mask"

    def operator_type(self) -> OperatorType:  # noqa: D102
        return OperatorType.Anonymize
