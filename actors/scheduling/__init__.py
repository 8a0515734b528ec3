"""Scheduling logic as plain Python: the classed batch queue, Busy, the online-first gate,
replica ranking, the Busy autoscaling decision (the traffic classes are ``domain``'s).

Nothing here imports Ray, FastAPI or gRPC (a test holds it to that): the deployments in
``actors/`` and the ingress in ``serve_app/`` adapt Serve's objects to these, and the unit tests
drive them with a fake clock.
"""

from actors.scheduling.autoscale import BusyPolicy, Decision, desired_replicas
from actors.scheduling.batch_queue import Batch, BatchQueue, OfflinePacing, Slice
from actors.scheduling.busy import BusyTracker
from actors.scheduling.gate import PriorityGate
from actors.scheduling.routing import ReplicaView, RoutingPolicy, rank

__all__ = [
    "Batch",
    "BatchQueue",
    "BusyPolicy",
    "BusyTracker",
    "Decision",
    "OfflinePacing",
    "PriorityGate",
    "ReplicaView",
    "RoutingPolicy",
    "Slice",
    "desired_replicas",
    "rank",
]
