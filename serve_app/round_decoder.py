"""A valid dispatch round (JSON or msgpack, or a gRPC message's fields) decoded straight into
the packer's columns, in C, for the hot path.

Validating a round with the pydantic model (``serve_app.schemas``) and then building its
domain objects was about half of a round's serving overhead (``bench/serve_load.py``); building
a domain object per rider, stop and carried order was most of what remained
(``bench/big_round.py``). Here a body, JSON or msgpack, is read by a
compiled reader (``http.round_body``: one pass over the bytes straight into the columns the
gRPC reader fills too, the request's rules applied once for all in ``round_columns``) once
the readers are loaded (``codecs.ready``). A body the reader does not take whole, or any body
while they load, goes to msgspec, which reads it into *wire* Structs *generated from that
model* (one definition of the request: its fields, defaults, bounds and the configured list
limits; nothing is restated) carrying every constraint of the bounded model (types without
coercion, ``ge``/``le``, lengths, no unknown fields; for msgpack, msgspec's reader: lengths
refused at their header, no binary or extension data where the model has none). Then:

* the new orders become columns (``domain.OrderColumns``, held to ``Order``'s rules over
  them) and the weights a domain type (``DispatchWeights``, converted from its Struct in C);
* when the round is packed, while the ETR call is out, the riders' Structs become columns
  (``planner.round_to_arrays.pack_served_round``), are held to the domain's rules for riders
  and rounds over whole arrays, and are packed from them.

The fast path only ever *accepts* (or, from the compiled reader, gives the model's own 413
for a round past a limit, found by counting): any body it does not take whole (an unknown
field, a bound, a domain rule, malformed JSON or msgpack) is validated by the pydantic model,
which gives the answer (the 422 naming every bad field, the 413 naming the limit). The wire
rules are the model's own: ``tests/serve/test_round_decoder.py`` holds every body to the
model's reading (the same orders, weights and packed arrays, or the same refusal), and the
generated Structs' rules to the model's.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable
from functools import partial
from operator import attrgetter
from typing import Annotated, Any

import msgspec
from msgspec import Meta
from pydantic import BaseModel

from domain import DispatchWeights, OrderColumns
from serve_app import codecs, model_rules
from serve_app.grpc_api import round_message
from serve_app.http import codec, round_body
from serve_app.pipeline.limits import Limits
from serve_app.pipeline.round_source import RoundSource
from serve_app.round_columns import ColumnRound
from serve_app.schemas import RequestModels


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field's type names, if it names one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _struct_type(annotation: Any, metadata: list[Any]) -> Any:
    """The msgspec type of a model field, with its constraints; models become Structs."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        inner, *extra = typing.get_args(annotation)
        return _struct_type(inner, [*metadata, *extra])
    if origin in (typing.Union, types.UnionType):
        # A field's constraints bind its value, never its None.
        arms = [
            a if a is type(None) else _struct_type(a, metadata) for a in typing.get_args(annotation)
        ]
        return typing.Union[tuple(arms)]  # noqa: UP007 (built at run time)
    if origin is list:
        (item,) = typing.get_args(annotation)
        listed = list[_struct_type(item, [])]  # type: ignore[misc]
        meta = model_rules.constraints(metadata)
        return Annotated[listed, Meta(**meta)] if meta else listed
    model = _model_of(annotation)
    if model is not None:
        return model_struct(model)
    meta = model_rules.constraints(metadata)
    return Annotated[annotation, Meta(**meta)] if meta else annotation


@functools.cache
def model_struct(model: type[BaseModel]) -> type:
    """The msgspec Struct that reads ``model``'s JSON, with every field and constraint of the
    model.

    Every Struct is gc=False: plain data that never forms a cycle, so the collector need not
    track it (a big round is tens of thousands of them, discarded or unpacked at once; tracked,
    they set off collections that scan them all)."""
    fields = []
    for name, info in model.model_fields.items():
        kind = _struct_type(info.annotation, list(info.metadata))
        if info.default_factory is not None:
            factory = info.default_factory
            made = _model_of(factory)
            if made is not None:
                factory = model_struct(made)
            fields.append((name, kind, msgspec.field(default_factory=factory)))
        elif info.is_required():
            fields.append((name, kind))
        else:
            fields.append((name, kind, info.default))
    return msgspec.defstruct(
        model.__name__, fields, forbid_unknown_fields=True, gc=False, kw_only=True
    )


class RoundDecoder:
    """The dispatch endpoint's decoder under ``limits``: ``read(body, media)`` gives the
    round; ``decode(body, media)`` is its fast path alone."""

    def __init__(self, limits: Limits) -> None:
        model = RequestModels.for_limits(limits).dispatch
        self._model, self._limits = model, limits
        wire = model_struct(model)
        self._wire: dict[str, Any] = {
            codec.JSON: msgspec.json.Decoder(wire),
            codec.MSGPACK: msgspec.msgpack.Decoder(wire),
        }

    @staticmethod
    @functools.cache
    def for_limits(limits: Limits) -> RoundDecoder:
        return RoundDecoder(limits)

    def read(self, body: bytes, media: str) -> RoundSource:
        """The round of a request ``body`` in ``media`` (``codec.JSON`` or ``codec.MSGPACK``):
        a valid round straight to columns (``RoundSource``), anything else validated by the
        model.
        The compiled reader is used once it is loaded (``codecs.ready``).
        Raises as ``codec.validate_body`` (the 422 naming the fields, the 413)."""
        call = self.decode(body, media, compiled=codecs.ready())
        if call is not None:
            return call
        return codec.validate_body(body, media, self._model).to_source()

    def decode(
        self, body: bytes, media: str = codec.JSON, compiled: bool = True
    ) -> RoundSource | None:
        """The round as a ``RoundSource`` when ``body`` (in ``media``) keeps the request's
        rules and its new orders and weights the domain's, else None. compiled : the body
        goes to the compiled reader of its media first (compiling it on first use), then to
        the Structs; False: to the Structs alone. Raises TooLarge where the compiled reader
        answers the model's 413 (``round_body``)."""
        by_model = partial(self._by_model, body, media)
        if compiled and media in self._wire:
            got = round_body.read_body_round(body, media, self._model, self._limits)
            if got is not None:
                return _column_source(got, by_model)
        try:
            got: Any = self._wire[media].decode(body)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return None
        return self._wire_round(got, by_model)

    def from_message(self, data: bytes, by_model: Callable[[], RoundSource]) -> RoundSource | None:
        """The round as a ``RoundSource`` from a serialized gRPC ``DispatchRequest``, read
        straight into columns by ``grpc_api.round_message`` under the same rules as ``decode``
        (its lists counted in the bytes and held to the limits first: TooLarge); None where
        they do not take it whole. by_model : the model's reading of the same request (its
        errors are the answer)."""
        got = round_message.read_round(data, self._model, self._limits)
        return None if got is None else _column_source(got, by_model)

    def _wire_round(self, got: Any, by_model: Callable[[], RoundSource]) -> RoundSource | None:
        try:
            weights = msgspec.convert(got.weights, DispatchWeights, from_attributes=True)
        except (msgspec.ValidationError, ValueError, TypeError):
            return None
        # Order's own rules over the columns (a promise before creation is the model's
        # check too, which the Structs cannot state).
        orders = OrderColumns.of(got.orders)
        if not orders.obeys_rules():
            return None
        riders = got.riders
        longest = max(map(len, map(attrgetter("route"), riders)), default=0)
        return RoundSource(
            got.now,
            got.utc_offset_s,
            orders,
            weights,
            (len(riders), longest),
            lambda: riders,
            by_model,
        )

    def _by_model(self, body: bytes, media: str) -> RoundSource:
        return codec.validate_body(body, media, self._model).to_source()


def _column_source(got: ColumnRound, by_model: Callable[[], RoundSource]) -> RoundSource:
    """The pipeline's round from a compiled reader's (its riders already columns)."""
    riders = got.riders
    return RoundSource(
        got.now,
        got.utc_offset_s,
        got.orders,
        got.weights,
        (len(riders.ids), got.longest_route),
        lambda: riders,
        by_model,
    )
