"""An emulated device for experiments at cluster scale on a machine without the GPUs.

A call computes its real answer, then sleeps off the CPU until ``call_ms / speed`` has passed;
one call at a time per device, in the order they came, as on one card. ``speed`` 0.5 is a GPU
type half as fast.
Figures measured with it are emulated and must be labelled so (``etr.runtime_emulated`` does the
same for the ETR model from a profile).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Emulation(BaseModel):
    """call_ms : one call's time on the reference device; speed : this device's relative
    throughput (1.0 reference); speed_by_node_resource : a speed per custom resource of the
    replica's node (the first the node has wins; e.g. ``{"gpu_t4": 0.5}`` on nodes started
    with that resource: a slower GPU type there)."""

    model_config = ConfigDict(extra="forbid")
    call_ms: float = Field(gt=0, le=60_000)
    speed: float = Field(1.0, gt=0, le=100)
    speed_by_node_resource: dict[str, float] = Field(default_factory=dict)

    def for_this_node(self) -> Emulation:
        """With ``speed`` set from this process's node (inside Ray; unchanged outside)."""
        if not self.speed_by_node_resource:
            return self
        import ray

        me = ray.get_runtime_context().get_node_id()
        node = next((n for n in ray.nodes() if n["NodeID"] == me), {})
        for resource, speed in self.speed_by_node_resource.items():
            if resource in node.get("Resources", {}):
                return self.model_copy(update={"speed": speed})
        return self


class FifoLock:
    """A lock granted in the order it was asked for: a card runs one stream's calls in the
    order they were submitted. (``threading.Lock`` grants a waiter at random: with three calls
    waiting, one could lose again and again, and an emulated queue's tail was the lock's.)"""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._served = 0  # tickets done
        self._issued = 0  # tickets given out

    def __enter__(self) -> None:
        with self._turn:
            ticket = self._issued
            self._issued += 1
            self._turn.wait_for(lambda: self._served == ticket)

    def __exit__(self, *exc: object) -> None:
        with self._turn:
            self._served += 1
            self._turn.notify_all()


class EmulatedDevice:
    def __init__(self, emulation: Emulation) -> None:
        self.emulation = emulation
        self._device = FifoLock()

    def run(self, compute: Callable[[], T]) -> T:
        with self._device:
            start = time.perf_counter()
            out = compute()
            left = self.emulation.call_ms / self.emulation.speed / 1e3
            left -= time.perf_counter() - start
            if left > 0:
                time.sleep(left)
            return out
