"""A model replica's load as Serve and Prometheus see it: Busy per traffic class, the stuck
alarm, the stats the router and the autoscaler read.

``working(traffic_class)`` wraps each device call. ``routing_stats()`` is what
``record_routing_stats`` returns (``actors.router`` reads ``busy`` and ``speed``),
``autoscaling_stats()`` what ``record_autoscaling_stats`` returns
(``actors.autoscaling`` reads ``busy_online`` and ``busy_offline``); both refresh the gauges
``orml_replica_busy`` (by class; Serve adds deployment and replica) and
``orml_replica_stuck``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache

from ray.serve import metrics

from actors.scheduling import BusyTracker
from domain import TrafficClass


@lru_cache(maxsize=1)
def _gauges() -> tuple[metrics.Gauge, metrics.Gauge]:
    # Serve tags every replica metric with its deployment, replica and application itself.
    busy = metrics.Gauge(
        "orml_replica_busy",
        description="Share of the last window the replica spent in device calls, 0..1.",
        tag_keys=("traffic_class",),
    )
    stuck = metrics.Gauge(
        "orml_replica_stuck",
        description="1 while the replica has been busy with no call finishing (an alarm).",
    )
    return busy, stuck


class ReplicaLoad:
    """speed : this replica's throughput relative to the reference device (the router gives a
    slower one less); window_s : Busy's window; stuck_after_s : busy this long with no call
    finishing is stuck."""

    def __init__(
        self, speed: float = 1.0, window_s: float = 10.0, stuck_after_s: float = 30.0
    ) -> None:
        self.speed, self.stuck_after_s = speed, stuck_after_s
        self.by_class = {c: BusyTracker(window_s) for c in TrafficClass}
        self.device = BusyTracker(window_s)
        self._reported: float | None = None  # monotonic time of the last autoscaling report

    @contextmanager
    def working(self, traffic_class: TrafficClass | str) -> Iterator[None]:
        with self.device.working(), self.by_class[TrafficClass(traffic_class)].working():
            yield

    def pause(self, traffic_class: TrafficClass | str) -> None:
        """Stop counting one call of ``traffic_class`` as work (it waits); ``resume`` after."""
        self.by_class[TrafficClass(traffic_class)].end()
        self.device.end()

    def resume(self, traffic_class: TrafficClass | str) -> None:
        self.device.begin()
        self.by_class[TrafficClass(traffic_class)].begin()

    def stuck(self) -> bool:
        return self.device.stuck(self.stuck_after_s)

    def routing_stats(self) -> dict[str, float]:
        self._export()
        return {"busy": self.device.busy(), "speed": self.speed}

    def autoscaling_stats(self) -> dict[str, float]:
        """Busy since the previous report: Serve averages the reports over its look-back
        window, so a sliding window here too would smooth twice and scale up seconds late."""
        self._export()
        now = time.monotonic()
        since = max(now - self._reported, 0.25) if self._reported is not None else None
        self._reported = now
        return {
            "busy_online": self.by_class[TrafficClass.ONLINE].busy(since),
            "busy_offline": self.by_class[TrafficClass.OFFLINE].busy(since),
        }

    def _export(self) -> None:
        busy, stuck = _gauges()
        for cls, tracker in self.by_class.items():
            busy.set(tracker.busy(), tags={"traffic_class": cls.value})
        stuck.set(1.0 if self.stuck() else 0.0)
