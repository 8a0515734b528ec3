"""The served pipeline, transport-free: what HTTP, gRPC and the Python handle all call.

No Ray, FastAPI or gRPC in here (a test holds it to that): the protocols parse, the pipeline
admits, decodes, runs the stages and raises its own errors, and ``serve_app.error_answers``
maps those to each protocol's answers.
"""

from serve_app.pipeline.admission import Admission, Lane, Permit
from serve_app.pipeline.context import CallContext
from serve_app.pipeline.dispatch import (
    EtrCall,
    Pipeline,
    SolveCall,
    check_round_limits,
)
from serve_app.pipeline.errors import (
    DeadlineExceeded,
    FieldError,
    InvalidInput,
    Overloaded,
    ServingError,
    TooLarge,
    Unavailable,
    UnsupportedMediaType,
)
from serve_app.pipeline.round_source import RoundSource

__all__ = [
    "Admission",
    "CallContext",
    "DeadlineExceeded",
    "EtrCall",
    "FieldError",
    "InvalidInput",
    "Lane",
    "Overloaded",
    "Permit",
    "Pipeline",
    "RoundSource",
    "ServingError",
    "SolveCall",
    "TooLarge",
    "Unavailable",
    "UnsupportedMediaType",
    "check_round_limits",
]
