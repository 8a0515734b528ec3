"""``BusyAutoscalingPolicy``: Serve's autoscaling over ``actors.scheduling.autoscale``.

Set per deployment in deploy.yaml::

    autoscaling_config:
      min_replicas: 1
      max_replicas: 4
      upscale_delay_s: 2        # Serve applies the delays and bounds around the policy
      downscale_delay_s: 60
      policy:
        policy_function: actors.autoscaling:BusyAutoscalingPolicy
        policy_kwargs: {target_busy: 0.6, band: 0.15, offline_max_share: 0.5}

Each replica reports ``{"busy_online", "busy_offline"}`` (``record_autoscaling_stats``); Serve
aggregates them per replica over its look-back window and calls the policy every control-loop
tick; the policy averages them and decides. Needs replicas to push their own stats
(``RAY_SERVE_COLLECT_AUTOSCALING_METRICS_ON_HANDLE=0``, see ``ops.local``).
"""

from __future__ import annotations

import logging
from typing import Any

from actors.scheduling.autoscale import BusyPolicy, desired_replicas

log = logging.getLogger("ray.serve")


class BusyAutoscalingPolicy:
    """policy_kwargs : ``BusyPolicy`` fields other than the replica bounds."""

    def __init__(self, **policy_kwargs: Any) -> None:
        self.kwargs = policy_kwargs
        BusyPolicy(**policy_kwargs)  # fail at deploy time on a bad setting
        self._last: int | None = None

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        metrics = ctx.aggregated_metrics or {}
        online = _mean(metrics.get("busy_online", {}))
        offline = _mean(metrics.get("busy_offline", {}))
        policy = BusyPolicy(
            min_replicas=ctx.capacity_adjusted_min_replicas,
            max_replicas=ctx.capacity_adjusted_max_replicas,
            **self.kwargs,
        )
        total = ctx.total_num_requests
        total = total() if callable(total) else (total or 0.0)
        decision = desired_replicas(ctx.current_num_replicas, online, offline, policy, float(total))
        if decision.replicas != ctx.current_num_replicas and decision.replicas != self._last:
            log.info(
                "%s: wants %d replicas, runs %d (Busy online %.2f, offline %.2f; %d reporting)",
                ctx.deployment_name,
                decision.replicas,
                ctx.current_num_replicas,
                online,
                offline,
                len(metrics.get("busy_online", {})),
            )
        self._last = decision.replicas
        return decision.replicas, {
            "busy": {
                "online": online,
                "offline": offline,
                "mean": decision.busy,
                "need_online": decision.need_online,
                "need_all": decision.need_all,
            }
        }


def _mean(per_replica: dict[Any, float]) -> float:
    values = [float(v) for v in per_replica.values()]
    return sum(values) / len(values) if values else 0.0
