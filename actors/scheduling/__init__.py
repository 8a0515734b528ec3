"""Scheduling logic as plain Python: traffic classes, the classed batch queue.

Nothing here imports Ray, FastAPI or gRPC (a test holds it to that): the deployments in
``actors/`` and the ingress in ``serve_app/`` adapt Serve's objects to these, and the unit tests
drive them with a fake clock.
"""

from actors.scheduling.batch_queue import Batch, BatchQueue, Slice
from actors.scheduling.traffic import TrafficClass

__all__ = ["Batch", "BatchQueue", "Slice", "TrafficClass"]
