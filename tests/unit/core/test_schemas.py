"""The data contract: Arrow schemas mirror the pydantic models; ids are stable."""

from __future__ import annotations

import typing

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxledger.schemas import Message, Session, canonical_json, content_hash
from ctxledger.schemas.arrow import arrow_schema, to_table
from ctxledger.warehouse.tables import TABLES


@pytest.mark.parametrize("table", sorted(TABLES))
def test_arrow_schema_has_every_model_field_in_order(table):
    model = TABLES[table]
    schema = arrow_schema(model)
    assert schema.names == list(model.model_fields)
    assert model.table == table
    assert model.key and all(k in model.model_fields for k in model.key)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_optional_fields_and_only_those_are_nullable(table):
    model = TABLES[table]
    hints = typing.get_type_hints(model)
    for field in arrow_schema(model):
        optional = type(None) in typing.get_args(hints[field.name])
        assert field.nullable == optional, field.name


def test_records_round_trip_through_arrow():
    message = Message(
        message_id="msg_1",
        session_id="ses_1",
        tenant_id="t",
        turn=0,
        role="user",
        content="hello",
        content_hash="h",
        token_count=1,
        policy_version="p",
        source_ref="f#line:1",
        tool_calls=[{"call_id": "c", "tool_name": "x", "arguments": "{}"}],
    )
    table = to_table(Message, [message.row()])
    assert Message.model_validate(table.to_pylist()[0]) == message


def test_models_are_frozen_and_reject_unknown_fields():
    session = Session(
        session_id="s",
        tenant_id="t",
        source_format="f",
        source_file="p",
        source_hash="h",
    )
    with pytest.raises(ValidationError):
        session.session_id = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        Session(
            session_id="s",
            tenant_id="t",
            source_format="f",
            source_file="p",
            source_hash="h",
            surprise=1,
        )


def test_unknown_role_is_rejected():
    with pytest.raises(ValidationError):
        Message(
            message_id="m",
            session_id="s",
            tenant_id="t",
            turn=0,
            role="narrator",
            content_hash="h",
            token_count=0,
            policy_version="p",
            source_ref="r",
        )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(json_values)
def test_content_hash_is_deterministic_and_key_order_free(value):
    assert content_hash(value) == content_hash(value)
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        assert canonical_json(reordered) == canonical_json(value)


@given(st.text(), st.text())
def test_content_hash_separates_parts(a, b):
    # ("ab", "") and ("a", "b") must not collide: parts are JSON-encoded as a list.
    if (a, b) != (a + b, ""):
        assert content_hash(a, b) != content_hash(a + b, "")


def test_arrow_type_rejects_unsupported_annotations():
    from ctxledger.schemas.arrow import arrow_type

    with pytest.raises(TypeError):
        arrow_type(dict[str, int])
    assert arrow_type(list[str]) == pa.list_(pa.string())
