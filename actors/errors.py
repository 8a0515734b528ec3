"""Typed errors the actors raise; ``serve_app.error_answers`` maps them to HTTP once."""

from __future__ import annotations


class DeviceUnhealthy(RuntimeError):
    """The replica's device failed a self-check (a sticky CUDA error, or wrong answers).

    Raised from ``check_health`` so Serve replaces the replica, and from request methods once
    detected so no further work lands on a poisoned device.

    during_call : the device failed while this call's own work ran on it (the call may be
    what broke it: the ingress does not hand it to replica after replica), not before.
    replica : the raising replica's Ray actor id (hex; by default this process's actor, None
    outside one): the ingress counts the replicas a call saw fail, and a tripped replica's
    process exiting under a retry that landed there again is the same replica, not a second.
    """

    def __init__(
        self, device: str, reason: str, during_call: bool = False, replica: str | None = None
    ) -> None:
        super().__init__(f"device {device} unhealthy: {reason}")
        self.device = device
        self.reason = reason
        self.during_call = during_call
        self.replica = replica if replica is not None else _this_actor()

    def __reduce__(self):  # crosses process boundaries through Ray: rebuild from every field
        return (type(self), (self.device, self.reason, self.during_call, self.replica))


def _this_actor() -> str | None:
    import ray

    if not ray.is_initialized():
        return None
    return ray.get_runtime_context().get_actor_id()


class DeadlinePassed(RuntimeError):
    """A queued request's deadline passed before any of it ran: dropped, not computed."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"dropped after waiting {waited_s:.3f} s: its deadline passed")
        self.waited_s = waited_s

    def __reduce__(self):
        return (type(self), (self.waited_s,))


class Abandoned(RuntimeError):
    """A call stopped computing because nobody waits for it any more: its caller cancelled it
    or its deadline passed (``actors.abandon``)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"stopped: {why}")
        self.why = why

    def __reduce__(self):
        return (type(self), (self.why,))


class WorkerLost(RuntimeError):
    """A worker process of the replica (an offline solve's child) died and its work could not
    be finished on a fresh one: retryable, the replica itself is sound."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def __reduce__(self):
        return (type(self), (self.why,))


class VersionNotLoaded(LookupError):
    """A model version asked for by name is not loaded in this replica."""

    def __init__(self, version: str, loaded: list[str]) -> None:
        super().__init__(f"version {version!r} is not loaded (loaded: {', '.join(loaded)})")
        self.version, self.loaded = version, loaded

    def __reduce__(self):
        return (type(self), (self.version, self.loaded))
