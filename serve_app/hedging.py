"""Hedged calls: when an attempt is slower than nearly all recent calls of its kind, send a second
copy to another replica and take whichever answers first ("The Tail at Scale", Dean and
Barroso 2013: defer the copy until the first has been outstanding past the 95th percentile).

What this is for: a replica that stopped answering without an error. The commonest case is a
node lost while a call ran there. Ray fails such a call once the cluster has declared the node
dead, and on a starved host that took longer than the request's deadline: the call ended as
504, and it held its admission slot all that time, so the requests queued behind it were shed.
A copy sent after the p95 finishes on a live replica instead. Every call the ingress makes is
idempotent (``serve_app.failover``), so two copies cannot apply anything twice; the loser is
cancelled, and a replica stops a cancelled solve at its next checkpoint.

A copy is extra work exactly when the fleet may already be slow, so copies are rationed by a
token bucket: each call earns ``budget`` of a token (5% of calls by default), a copy spends one,
and at most ``burst`` are banked (enough for one node's in-flight calls). A copy refused by
back-pressure is dropped and the first attempt goes on.

Plain Python (no Ray, no clock of its own): the simulation and the tests drive it directly.
"""

from __future__ import annotations

from collections import defaultdict, deque

from serve_app.config import HedgeArgs


class HedgePolicy:
    """Per call kind ("OrSolver.solve_round"): how long to wait before a copy, and whether one
    may go. ``delay_s`` and ``take`` are called per attempt, ``answered`` per answered call
    (latency in seconds)."""

    #: Answered calls of a kind needed before its quantile is trusted over ``min_delay_s``.
    MIN_SAMPLES = 20

    def __init__(self, args: HedgeArgs | None = None) -> None:
        self.args = args or HedgeArgs()
        self._latencies: dict[str, deque[float]] = defaultdict(
            lambda: deque(maxlen=self.args.window)
        )
        self._tokens = self.args.burst
        self.sent = 0  # copies sent
        self.won = 0  # copies that answered first

    def delay_s(self, kind: str) -> float | None:
        """Seconds after which an attempt of ``kind`` gets a copy; None when hedging is off.
        Earns this call's share of a token."""
        if not self.args.enabled:
            return None
        self._tokens = min(self.args.burst, self._tokens + self.args.budget)
        seen = self._latencies[kind]
        if len(seen) < self.MIN_SAMPLES:
            return self.args.min_delay_s
        ordered = sorted(seen)
        at = ordered[min(len(ordered) - 1, int(self.args.quantile * len(ordered)))]
        return max(self.args.min_delay_s, at)

    def take(self) -> bool:
        """Spend a token for a copy; False when none is left."""
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        self.sent += 1
        return True

    def answered(self, kind: str, latency_s: float, by_copy: bool = False) -> None:
        self._latencies[kind].append(latency_s)
        self.won += int(by_copy)
