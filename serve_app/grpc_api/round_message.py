"""A gRPC dispatch round (``orml.v1.DispatchRequest``'s bytes) read straight into the packer's
columns: the protobuf twin of the JSON and msgpack readers (``http.round_body``).

Read the usual way, a 5000-rider round is ~90,000 protobuf messages, each turned into a dict,
then into a wire Struct: about 0.35 s of Python at the edge for a round the solver plans in
0.2 s. Here a compiled pass (``_round_message_jit.count``) counts the lists in the bytes and
holds them to the limits (TooLarge naming the list, before anything is built), a second one
reads the bytes into the columns every reader fills (``round_columns.FilledColumns``: every
number, a span per string; proto3 ``optional``: unset is "missing", as in the HTTP body), and
the request's rules are applied over them once for every wire form (``round_columns``).

Like the JSON path this reader only ever *accepts*: anything it does not take whole returns
None and the message is read the usual way, whose answer (the INVALID_ARGUMENT naming the
field) stands. ``tests/serve/test_round_message.py`` holds it to that reading.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from serve_app.grpc_api import _round_message_jit as jit
from serve_app.pipeline.errors import TooLarge
from serve_app.pipeline.limits import Limits
from serve_app.round_columns import ColumnRound, FilledColumns, round_of


def read_round(data: bytes, model: type[BaseModel], limits: Limits) -> ColumnRound | None:
    """The round in ``data`` (a serialized ``DispatchRequest``) under ``model``'s rules, or
    None where it does not take the message whole. Its lists are counted first, in one
    compiled pass over the bytes, and held to ``limits`` before anything is built (TooLarge
    naming the list, as ``wire.check_counts`` does for the parser's path). The domain's rules
    are the caller's (``obeys_domain_rules``), as for JSON."""
    buf = np.frombuffer(data, np.uint8)
    counted = jit.count(buf).tolist()
    n_riders, n_stops, n_carried, n_picked, n_new, n_counts, status = counted[:7]
    if status != jit.OK:
        return None
    most_stops, most_carried, most_picked = counted[7:]
    for name, got, limit in (
        ("riders", n_riders, limits.max_riders),
        ("orders", n_new, limits.max_orders),
        ("route stops", most_stops, limits.max_route_stops),
        ("orders on a route", most_carried, limits.max_route_stops),
        ("picked-up orders", most_picked, limits.max_route_stops),
    ):
        if got > limit:
            raise TooLarge(name, got, limit)
    filled = FilledColumns.allocate(n_riders, n_stops, n_carried + n_new, n_picked, n_counts)
    if jit.fill(buf, *filled.arrays(), n_carried) != jit.OK:
        return None
    return round_of(buf, filled, n_carried, model)


def warm_up() -> None:
    """Compile the reader (or load it from Numba's on-disk cache) in this process: every
    compiled function, on a round with one of each thing it reads."""
    from serve_app.grpc_api import orml_pb2 as pb
    from serve_app.schemas import DispatchRequest

    def order(name: str) -> pb.Order:
        here = pb.Position(lat=1.0, lng=1.0)
        return pb.Order(
            id=name,
            pickup=here,
            dropoff=here,
            created_at=1.0,
            ready_at=1.0,
            promised_at=2.0,
            item_counts=[1],
        )

    rider = pb.Rider(
        id="r",
        position=pb.Position(lat=1.0, lng=1.0),
        speed_mps=1.0,
        capacity=2.0,
        route=[pb.Stop(order_id="a", kind="dropoff")],
        orders=[order("a")],
        picked_up=["a"],
    )
    message = pb.DispatchRequest(now=1.0, riders=[rider], orders=[order("b")])
    if read_round(message.SerializeToString(), DispatchRequest, Limits()) is None:
        raise RuntimeError("the round reader refused its own warm-up round")
