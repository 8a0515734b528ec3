"""The errors a request can end with, one class per kind of answer.

Raised by the pipeline and by the edges' parsers; ``serve_app.error_answers`` maps each class to one
HTTP status and one gRPC code (one table, looked up along the class hierarchy). Each carries
what its answer must say: the field, the limit, how long to wait before retrying.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace


class ServingError(Exception):
    """Base of every error the API answers on purpose (anything else is a 500)."""


@dataclass(frozen=True)
class FieldError:
    """One invalid field: ``loc`` its path in the request (``("body", "orders", 0, "id")``)."""

    loc: tuple[str | int, ...]
    msg: str
    type: str = "value_error"


#: Characters of one error message at most (a message may quote a client's ids).
MAX_MESSAGE_CHARS = 300


class InvalidInput(ServingError):
    """The request parses but a field is wrong (422 / INVALID_ARGUMENT).

    errors : the field errors to answer (the edges list at most a few: ``capped``); each
    message is cut at ``MAX_MESSAGE_CHARS``."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = [
            e if len(e.msg) <= MAX_MESSAGE_CHARS else replace(e, msg=e.msg[:MAX_MESSAGE_CHARS])
            for e in errors
        ]
        first = self.errors[0] if self.errors else FieldError(("body",), "invalid request")
        super().__init__(f"{'.'.join(map(str, first.loc))}: {first.msg}")

    @classmethod
    def at(cls, loc: tuple[str | int, ...], msg: str) -> InvalidInput:
        return cls([FieldError(loc, msg)])

    @classmethod
    def capped(
        cls, shown: Sequence[FieldError], total: int, at: tuple[str | int, ...] = ("body",)
    ) -> InvalidInput:
        """``shown`` (the first of ``total`` errors), and one more entry at ``at`` saying how
        many were left out, if any."""
        more = total - len(shown)
        tail = [FieldError(at, f"{more} more errors not shown", "too_many_errors")]
        return cls([*shown, *(tail if more > 0 else [])])

    def __reduce__(self):  # crosses Ray's process boundary as itself
        return (type(self), (self.errors,))


class PoisonRequest(InvalidInput):
    """A request whose calls made ``faults`` replicas fail while they ran there: taken for the
    cause, it is not sent to another (422 / INVALID_ARGUMENT; do not retry it unchanged)."""

    def __init__(self, request_id: str, target: str, faults: int, last_error: str) -> None:
        msg = (
            f"request {request_id[:128]}: {faults} {target} replicas failed while computing it "
            f"(last: {last_error}); it is not sent to another"
        )
        super().__init__([FieldError(("body",), msg, "poison_request")])
        self.request_id, self.target, self.faults = request_id, target, faults
        self.last_error = last_error

    def __reduce__(self):
        return (type(self), (self.request_id, self.target, self.faults, self.last_error))


class UnsupportedMediaType(ServingError):
    """The body's content type is not one the endpoint reads (415 / INVALID_ARGUMENT)."""

    def __init__(self, got: str, accepted: Sequence[str]) -> None:
        super().__init__(f"content-type {got!r} is not supported; send one of {list(accepted)}")


class TooLarge(ServingError):
    """Over a configured size limit (413 / RESOURCE_EXHAUSTED), naming the limit."""

    def __init__(self, what: str, got: int, limit: int) -> None:
        super().__init__(f"{what}: {got} exceeds the limit of {limit}")
        self.what, self.got, self.limit = what, got, limit

    def __reduce__(self):
        return (type(self), (self.what, self.got, self.limit))


class Overloaded(ServingError):
    """Shed: no room now (503 + Retry-After / RESOURCE_EXHAUSTED + RetryInfo).

    reason : "queue_full", "deadline" (could not start before its deadline), "backpressure"
    (a deployment's own queue was full); retry_after_s : when a retry is likely to be admitted.
    """

    def __init__(self, reason: str, retry_after_s: float, detail: str = "") -> None:
        super().__init__(detail or f"overloaded ({reason}); retry after {retry_after_s:.1f} s")
        self.reason, self.retry_after_s = reason, retry_after_s

    def __reduce__(self):
        return (type(self), (self.reason, self.retry_after_s, str(self)))


class DeadlineExceeded(ServingError):
    """The request's deadline passed while it was being computed (504 / DEADLINE_EXCEEDED)."""


class BodyTimeout(ServingError):
    """The request's body did not arrive within its deadline (408 / DEADLINE_EXCEEDED): a
    client that trickles or stops sending its body gives its admission slot back."""


class NotFound(ServingError):
    """A model or a model version this server does not serve (404 / NOT_FOUND)."""


class Unavailable(ServingError):
    """No healthy replica could answer in time (503 + Retry-After / UNAVAILABLE)."""

    def __init__(self, detail: str, retry_after_s: float = 1.0) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s

    def __reduce__(self):
        return (type(self), (str(self), self.retry_after_s))


class Unauthenticated(ServingError):
    """No bearer token, or one no configured token matches (401 / UNAUTHENTICATED)."""

    def __init__(self, endpoint: str, reason: str) -> None:
        super().__init__(
            f"{endpoint}: {reason}; send 'Authorization: Bearer <token>' (HTTP header or gRPC "
            "metadata)"
        )
        self.endpoint = endpoint


class Forbidden(ServingError):
    """A valid token that may not call this endpoint (403 / PERMISSION_DENIED)."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(f"{endpoint}: this token is not allowed to call it")
        self.endpoint = endpoint
