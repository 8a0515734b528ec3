"""The ETR deployment: ``actors.etr_batcher.EtrBatcher`` as a Serve replica that owns a device.

What the replica adds to the batcher: Serve's options (the Busy router, a high
``max_ongoing_requests`` so that requests reach the batcher, which queues them by class and
deadline), the health check that catches a poisoned device, drills' fault injection, and the
load it reports to the router and the autoscaler.
"""

from __future__ import annotations

from typing import Any

from ray import serve

from actors.errors import DeviceUnhealthy
from actors.etr_batcher import EtrBatcher
from actors.faults import replica_id
from actors.router import BUSY_ROUTER


# max_ongoing_requests high: requests must reach the batcher (which queues them by class and
# deadline); capped at 5, the rest wait in the caller's router, which backs off when full.
# user_config {} by default: Serve calls reconfigure, which loads the model, on every start.
@serve.deployment(
    name="Etr",
    ray_actor_options={"num_cpus": 0.5},
    max_ongoing_requests=512,
    request_router_config=BUSY_ROUTER,
    user_config={},
)
class EtrDeployment(EtrBatcher):
    """runtime, guard, speed, inline_calls : as ``EtrBatcher``."""

    def inject_fault(self, kind: str) -> dict[str, Any]:
        """Drills only (see ``actors.faults``); FaultInjectionDisabled unless deployed with it."""
        return {"replica": replica_id(), "at": self.guard.faults.inject(kind)}

    def record_routing_stats(self) -> dict[str, float]:
        return self.load.routing_stats()

    def record_autoscaling_stats(self) -> dict[str, float]:
        return self.load.autoscaling_stats()

    async def check_health(self) -> None:
        if self.load.stuck():
            raise DeviceUnhealthy(self.guard.device, "busy with no call finishing (stuck)")
        await self.guard.check_and_hold(self.settings.health_hold_s)
