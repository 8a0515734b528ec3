"""A valid JSON dispatch round decoded straight into domain types, in C, for the hot path.

Validating a round with the pydantic model (``serve_app.schemas``) and then building its
domain objects was about half of a round's serving overhead (``bench/serve_load.py``). Here
msgspec reads the body twice, with Structs *generated from that model* (one definition of the
request: its fields, defaults, bounds and the configured list limits; nothing is restated):

1. against *wire* Structs carrying every constraint of the bounded model (types without
   coercion, ``ge``/``le``, lengths, no unknown fields);
2. straight into the domain types the model converts to (``Order``, ``LatLng``, ``Stop``,
   ``DispatchWeights``: their JSON names are their field names, and their ``__post_init__``
   runs as usual), the riders then assembled.

The fast path only ever *accepts*: any body it does not take whole (an unknown field, a bound,
a domain rule, malformed JSON) is validated by the pydantic model, which gives the answer (the
422 naming every bad field, the 413 naming the limit). The wire rules are the model's own:
``tests/serve/test_round_decoder.py`` holds every body it accepts to the model's domain round,
and the generated Structs' rules to the model's.
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Annotated, Any

import annotated_types
import msgspec
from msgspec import Meta
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from domain import DispatchRound, DispatchWeights, LatLng, Order, Rider, Route, Stop
from serve_app import http_edge
from serve_app.pipeline.dispatch import DispatchCall, DispatchSource
from serve_app.pipeline.limits import Limits
from serve_app.schemas import OrderIn, Position, RequestModels, StopIn, WeightsIn

#: The request models whose JSON object *is* a domain type's (same field names), read
#: straight into it on the second pass.
DOMAIN_TYPES: dict[type[BaseModel], type] = {
    Position: LatLng,
    OrderIn: Order,
    StopIn: Stop,
    WeightsIn: DispatchWeights,
}

#: annotated_types constraints as msgspec ``Meta`` keywords.
_CONSTRAINTS = {
    annotated_types.Ge: "ge",
    annotated_types.Le: "le",
    annotated_types.Gt: "gt",
    annotated_types.Lt: "lt",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


def _meta(metadata: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in metadata:
        if isinstance(m, FieldInfo):  # Annotated[X, Field(...)]
            out |= _meta(m.metadata)
        elif type(m) in _CONSTRAINTS:
            key = _CONSTRAINTS[type(m)]
            out[key] = getattr(m, key)
    return out


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field's type names, if it names one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _struct_type(annotation: Any, metadata: list[Any], domain: bool) -> Any:
    """The msgspec type of a model field: constraints kept on the wire, dropped on the
    domain pass (already checked); models become Structs, or their domain type."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *extra = typing.get_args(annotation)
        return _struct_type(inner, [*metadata, *extra], domain)
    if origin in (typing.Union, types.UnionType):
        # A field's constraints bind its value, never its None.
        arms = [
            a if a is type(None) else _struct_type(a, metadata, domain)
            for a in typing.get_args(annotation)
        ]
        return typing.Union[tuple(arms)]  # noqa: UP007 (built at run time)
    if origin is list:
        (item,) = typing.get_args(annotation)
        listed = list[_struct_type(item, [], domain)]  # type: ignore[misc]
        meta = _meta(metadata)
        return Annotated[listed, Meta(**meta)] if meta and not domain else listed
    model = _model_of(annotation)
    if model is not None:
        return model_struct(model, domain)
    meta = _meta(metadata)
    return Annotated[annotation, Meta(**meta)] if meta and not domain else annotation


@functools.cache
def model_struct(model: type[BaseModel], domain: bool = False) -> type:
    """The msgspec type that reads ``model``'s JSON: a generated Struct with every field and
    constraint of the model (``domain=False``), or the type the model converts to, as the
    domain pass reads it (``domain=True``: ``DOMAIN_TYPES``, else a Struct of domain types).

    Every Struct is gc=False: plain data that never forms a cycle, so the collector need not
    track it (a big round is tens of thousands of them, discarded or unpacked at once; tracked,
    they set off collections that scan them all)."""
    if domain:
        for base, kind in DOMAIN_TYPES.items():
            if issubclass(model, base):
                return kind
    fields = []
    for name, info in model.model_fields.items():
        kind = _struct_type(info.annotation, list(info.metadata), domain)
        if info.default_factory is not None:
            factory = info.default_factory
            made = _model_of(factory)
            if made is not None:
                factory = model_struct(made, domain)
            fields.append((name, kind, msgspec.field(default_factory=factory)))
        elif info.is_required():
            fields.append((name, kind))
        else:
            fields.append((name, kind, info.default))
    return msgspec.defstruct(
        model.__name__, fields, forbid_unknown_fields=not domain, gc=False, kw_only=True
    )


class RoundDecoder:
    """The dispatch endpoint's decoder under ``limits``: ``read(body, media)`` gives the
    round; ``decode(body)`` is its fast path alone."""

    def __init__(self, limits: Limits) -> None:
        model = RequestModels.for_limits(limits).dispatch
        self._model = model
        self._wire = msgspec.json.Decoder(model_struct(model))
        self._domain = msgspec.json.Decoder(model_struct(model, domain=True))

    @staticmethod
    @functools.cache
    def for_limits(limits: Limits) -> RoundDecoder:
        return RoundDecoder(limits)

    def read(self, body: bytes, media: str) -> DispatchSource:
        """The round of a request ``body`` in ``media`` (``http_edge.JSON`` or msgpack): a
        valid JSON round straight to domain types, anything else validated by the model.
        Raises as ``http_edge.validate_body`` (the 422 naming the fields, the 413)."""
        if media == http_edge.JSON:
            call = self.decode(body)
            if call is not None:
                return call
        return http_edge.validate_body(body, media, self._model)

    def decode(self, body: bytes) -> DispatchCall | None:
        """The round as a ``DispatchCall`` when the JSON ``body`` is a valid dispatch request,
        else None."""
        try:
            self._wire.decode(body)  # the model's rules; the result is not needed
            # Order.__post_init__ refuses a promise before creation (the model's own check).
            got: Any = self._domain.decode(body)
            riders = tuple(
                Rider(
                    r.id,
                    r.position,
                    r.speed_mps,
                    r.capacity,
                    Route(tuple(r.route)),
                    tuple(r.orders),
                    frozenset(r.picked_up),
                    r.available_at,
                )
                for r in got.riders
            )
            round_ = DispatchRound(got.now, riders, tuple(got.orders), got.weights)
        except (msgspec.DecodeError, ValueError, TypeError):
            return None
        return DispatchCall(round_, got.utc_offset_s)
