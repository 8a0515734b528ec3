"""``BusyAutoscalingPolicy``: Serve's autoscaling over ``actors.scheduling.autoscale``.

Set per deployment in deploy.yaml::

    autoscaling_config:
      min_replicas: 1
      max_replicas: 4
      policy:
        policy_function: actors.autoscaling:BusyAutoscalingPolicy
        policy_kwargs: {target_busy: 0.6, band: 0.15, offline_max_share: 0.5}

Each replica reports ``{"busy_online", "busy_offline"}`` (``record_autoscaling_stats``); Serve
aggregates them per replica over its look-back window and calls the policy every control-loop
tick with the current replicas; the policy averages them, decides, and keeps its state in
Serve's ``policy_state``. Bounds come from the deployment's ``min_replicas``/``max_replicas``.
"""

from __future__ import annotations

import time
from typing import Any

from actors.scheduling.autoscale import BusyPolicy, ScalingState, desired_replicas


class BusyAutoscalingPolicy:
    """policy_kwargs : ``BusyPolicy`` fields other than the replica bounds."""

    def __init__(self, **policy_kwargs: Any) -> None:
        self.kwargs = policy_kwargs
        BusyPolicy(**policy_kwargs)  # fail at deploy time on a bad setting

    def __call__(self, ctx: Any) -> tuple[int, dict[str, Any]]:
        metrics = ctx.aggregated_metrics or {}
        online = _mean(metrics.get("busy_online", {}))
        offline = _mean(metrics.get("busy_offline", {}))
        policy = BusyPolicy(
            min_replicas=ctx.capacity_adjusted_min_replicas,
            max_replicas=ctx.capacity_adjusted_max_replicas,
            **self.kwargs,
        )
        saved = ctx.policy_state.get("busy") or {}
        state = ScalingState(saved.get("above_since"), saved.get("below_since"))
        now = ctx.current_time if ctx.current_time is not None else time.time()
        target, state = desired_replicas(
            ctx.current_num_replicas, online, offline, now, policy, state
        )
        return target, {
            "busy": {
                "above_since": state.above_since,
                "below_since": state.below_since,
                **state.last,
                "online": online,
                "offline": offline,
            }
        }


def _mean(per_replica: dict[Any, float]) -> float:
    values = [float(v) for v in per_replica.values()]
    return sum(values) / len(values) if values else 0.0
