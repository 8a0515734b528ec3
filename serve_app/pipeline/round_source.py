"""The one form of a dispatch request the pipeline takes, whatever protocol brought it.

Every reader makes a ``RoundSource``: the JSON, msgpack and protobuf fast paths
(``serve_app.round_decoder``: riders as columns straight from the request), the request
model's reading (``serve_app.schemas.DispatchRequest.to_source``: the answer for anything the
fast paths do not take whole) and the Python handle (``RoundSource.of_round``: a domain
round). It is built in the order the pipeline needs it: the sizes first (limits), the new
orders next (they start the ETR stage), the packed round last (riders are most of the work;
it overlaps the ETR call).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from domain import DispatchRound, DispatchWeights, OrderColumns
from planner.rider_columns import RiderColumns, RiderLike
from planner.round_to_arrays import PackedRound, pack_served_round


@dataclass(frozen=True)
class RoundSource:
    """A dispatch round: its new orders as columns, its weights a domain type.

    riders : the riders, given when the round is packed (``packed``), as columns (a gRPC
        message's) or as objects with ``domain.Rider``'s fields (domain riders, a JSON
        request's wire Structs); building them may raise ``InvalidInput`` naming the rider
        that breaks a domain rule.
    unchecked : None where the riders come from domain types (their checks ran); else they
        came straight from a request and are held to the domain's rules over whole columns
        when packed (``planner.round_to_arrays.pack_served_round``), and where those refuse
        the round, ``unchecked()`` reads the request with its model, whose round (and
        ``InvalidInput`` naming the rider or order) is the answer.
    shape : (riders, stops on the longest committed route).
    """

    now: float
    utc_offset_s: float
    orders: OrderColumns
    weights: DispatchWeights
    shape: tuple[int, int]
    riders: Callable[[], RiderColumns | Sequence[RiderLike]]
    unchecked: Callable[[], RoundSource] | None = None

    @staticmethod
    def of_round(round_: DispatchRound, utc_offset_s: float = 0.0) -> RoundSource:
        """A round already in domain types (the Python API, tests)."""
        longest = max((len(r.route) for r in round_.riders), default=0)
        return RoundSource(
            round_.now,
            utc_offset_s,
            OrderColumns.of(round_.orders),
            round_.weights,
            (len(round_.riders), longest),
            lambda: round_.riders,
        )

    def sizes(self) -> tuple[int, int, int]:
        """(riders, new orders, stops on the longest committed route)."""
        return self.shape[0], len(self.orders), self.shape[1]

    def etr_floor(self) -> bool:
        """Whether the round is priced with the ETR model (``DispatchWeights.etr_floor``)."""
        return self.weights.etr_floor

    def new_orders(self) -> OrderColumns:
        return self.orders

    def dispatch_weights(self) -> DispatchWeights:
        return self.weights

    def packed(self) -> PackedRound:
        """The round as the kernels' arrays (``planner.round_to_arrays``): one call there."""
        got = pack_served_round(
            self.now,
            self.riders(),
            self.orders,
            self.weights.max_lateness_s,
            check=self.unchecked is not None,
        )
        if got is None:  # the domain's rules refuse the riders: the model's reading answers
            assert self.unchecked is not None
            return self.unchecked().packed()
        return got
