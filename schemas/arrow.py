"""Arrow schemas derived from the pydantic records, so the contract lives in one place.

Supported annotations: str, int, float, bool, datetime, ``X | None``, ``Literal[...]``
of strings, ``list[X]`` and nested pydantic models (as structs). ``Annotated[X, t]``
with a ``pyarrow.DataType`` ``t`` stores X as ``t`` (e.g. ``Float32`` for compact
embedding vectors); other ``Annotated`` metadata is ignored. Anything else is a
programming error and raises at import of the table that uses it.
"""

from __future__ import annotations

import functools
import types
import typing
from datetime import datetime
from typing import Annotated, Any, Literal, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel

_SCALARS: dict[Any, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


#: A float stored as Arrow float32 (half the bytes of the default float64).
Float32 = Annotated[float, pa.float32()]


def _unwrap_optional(annotation: Any) -> tuple[Any, bool]:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        if not any(isinstance(item, pa.DataType) for item in metadata):
            return _unwrap_optional(base)
        return annotation, False
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return args[0], True
    return annotation, False


def arrow_type(annotation: Any) -> pa.DataType:
    """Map one python annotation to an Arrow type."""
    annotation, _ = _unwrap_optional(annotation)
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *metadata = get_args(annotation)
        for item in metadata:
            if isinstance(item, pa.DataType):
                return item
        return arrow_type(base)
    if origin is Literal:
        values = get_args(annotation)
        if not all(isinstance(v, str) for v in values):
            raise TypeError(f"only string literals are supported: {annotation!r}")
        return pa.string()
    if origin is list:
        (item,) = get_args(annotation)
        return pa.list_(arrow_type(item))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(arrow_fields(annotation))
    if annotation in _SCALARS:
        return _SCALARS[annotation]
    raise TypeError(f"unsupported annotation {annotation!r}")


def arrow_fields(model: type[BaseModel]) -> list[pa.Field]:
    """Arrow fields for every model field, nullability from ``X | None``."""
    fields = []
    hints = typing.get_type_hints(model, include_extras=True)
    for name in model.model_fields:
        _, optional = _unwrap_optional(hints[name])
        fields.append(pa.field(name, arrow_type(hints[name]), nullable=optional))
    return fields


@functools.cache
def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The Arrow schema of a record model, derived once per model and process
    (``pa.Schema`` is immutable): a commit asked for every table's schema
    twice and resolving the type hints each time cost ~0.2 s of it."""
    return pa.schema(arrow_fields(model))


def to_table(model: type[BaseModel], rows: list[dict[str, Any]]) -> pa.Table:
    """Build an Arrow table of ``rows`` (dicts from ``Record.row()``) for ``model``."""
    return pa.Table.from_pylist(rows, schema=arrow_schema(model))
