"""What a replica knows about its device, and the self-check behind ``check_health``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from actors.errors import DeviceUnhealthy


@dataclass
class DeviceGuard:
    """Runs a known computation and compares it with the answer recorded at start.

    A CUDA error that poisons the context makes every later call fail or return garbage; both
    trip the guard, after which ``healthy`` stays False (a poisoned context does not recover)
    and Serve replaces the replica.
    """

    device: str
    probe: Callable[[], Any]
    expected: np.ndarray | None = None
    healthy: bool = True
    reason: str = ""

    def arm(self) -> None:
        self.expected = np.asarray(self._host(self.probe()))

    def check(self) -> None:
        """Raise DeviceUnhealthy if the probe fails or its answer changed."""
        if not self.healthy:
            raise DeviceUnhealthy(self.device, self.reason)
        try:
            got = np.asarray(self._host(self.probe()))
            if self.device.startswith("cuda"):
                import cupy

                cupy.cuda.Device().synchronize()
        except Exception as exc:
            self.trip(f"probe raised {type(exc).__name__}: {exc}")
        else:
            if self.expected is not None and not np.allclose(got, self.expected, equal_nan=True):
                self.trip("probe answer changed")
        if not self.healthy:
            raise DeviceUnhealthy(self.device, self.reason)

    def ensure(self) -> None:
        """Raise DeviceUnhealthy at once if a fault was already detected (no probe run)."""
        if not self.healthy:
            raise DeviceUnhealthy(self.device, self.reason)

    def trip(self, reason: str) -> None:
        self.healthy = False
        self.reason = reason

    @staticmethod
    def _host(a: Any) -> Any:
        get = getattr(a, "get", None)
        return get() if callable(get) else a
