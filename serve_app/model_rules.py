"""What a request model says of its fields, read for the readers that apply its rules
without it (the JSON, msgpack and protobuf fast paths): each field's constraints, bounds,
lengths and item types, from the pydantic model, so no rule is restated beside it."""

from __future__ import annotations

import math
import types
import typing
from typing import Annotated, Any

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

#: annotated_types constraints by the keyword that names them (msgspec's ``Meta`` too).
CONSTRAINTS = {
    annotated_types.Ge: "ge",
    annotated_types.Le: "le",
    annotated_types.Gt: "gt",
    annotated_types.Lt: "lt",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


def constraints(metadata: list[Any]) -> dict[str, Any]:
    """The constraints in a field's ``metadata`` as keywords (``ge``, ``le``, ``gt``, ``lt``,
    ``min_length``, ``max_length``); a ``Field(...)`` inside ``Annotated`` included."""
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):  # Annotated[X, Field(...)]
            out |= constraints(m.metadata)
        elif type(m) in CONSTRAINTS:
            key = CONSTRAINTS[type(m)]
            out[key] = getattr(m, key)
    return out


def field(model: type[BaseModel], path: str) -> FieldInfo:
    """The field at a dotted ``path`` of ``model`` (e.g. "pickup.lat"). KeyError if none."""
    head, _, rest = path.partition(".")
    info = model.model_fields[head]
    if not rest:
        return info
    inner = info.annotation
    if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
        raise KeyError(path)
    return field(inner, rest)


def _arms(annotation: Any) -> list[Any]:
    """The types a value may take: a union's arms (None left out), else the annotation."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(annotation) if a is not type(None)]
    return [annotation]


def _all_constraints(info: FieldInfo) -> dict[str, Any]:
    """The field's constraints, with those of an ``Annotated`` arm of its type (``X | None``)."""
    out = constraints(list(info.metadata))
    for arm in _arms(info.annotation):
        if typing.get_origin(arm) is Annotated:
            out = constraints(list(typing.get_args(arm)[1:])) | out
    return out


def bounds(info: FieldInfo) -> tuple[float, float]:
    """[lo, hi] of a number field (infinite where unbounded; a strict bound as the nearest
    float inside it)."""
    c = _all_constraints(info)
    lo = c.get("ge", math.nextafter(c["gt"], math.inf) if "gt" in c else -math.inf)
    hi = c.get("le", math.nextafter(c["lt"], -math.inf) if "lt" in c else math.inf)
    return float(lo), float(hi)


def lengths(info: FieldInfo) -> tuple[float, float]:
    """[min, max] length of a string or list field (max infinite where unbounded)."""
    c = _all_constraints(info)
    return float(c.get("min_length", 0)), float(c.get("max_length", math.inf))


def max_length(info: FieldInfo) -> int | None:
    return _all_constraints(info).get("max_length")


def _item_type(info: FieldInfo) -> Any:
    (arm,) = _arms(info.annotation)
    if typing.get_origin(arm) is not list:
        raise TypeError(f"not a list field: {info.annotation}")
    (item,) = typing.get_args(arm)
    return item


def item_model(info: FieldInfo) -> type[BaseModel] | None:
    """The model of a list field's items, if they are models."""
    item = _item_type(info)
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


def item_field(info: FieldInfo) -> FieldInfo:
    """A list field's item type as a field (its constraints readable like a field's)."""
    return FieldInfo.from_annotation(_item_type(info))
