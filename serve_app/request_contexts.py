"""A request's context, built in this one place for HTTP (its headers) and gRPC (its
metadata)."""

from __future__ import annotations

from collections.abc import Mapping

from domain import TrafficClass
from serve_app.config import AdmissionArgs
from serve_app.pipeline.api_keys import ApiKeys
from serve_app.pipeline.context import CallContext, context_from_metadata


class RequestContexts:
    """api_keys : who may call which endpoint; admission : the default deadline and the
    priority key."""

    def __init__(self, api_keys: ApiKeys, admission: AdmissionArgs) -> None:
        self.api_keys, self.admission = api_keys, admission

    def __call__(
        self, metadata: Mapping[str, str], traffic_class: TrafficClass, endpoint: str
    ) -> CallContext:
        """The caller's key checked for ``endpoint`` (``Unauthenticated`` / ``Forbidden``),
        then its deadline, class and request id (``context_from_metadata``)."""
        self.api_keys.check(endpoint, metadata.get("authorization"))
        a = self.admission
        key = None if a.priority_key is None else a.priority_key.get_secret_value()
        return context_from_metadata(metadata, traffic_class, a.default_timeout_s, key)
