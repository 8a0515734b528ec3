"""The ETR (estimated time of delivery) model: features, training, artifact, runtimes."""

from etr.features import (
    FEATURE_NAMES,
    N_FEATURES,
    build_features,
    features_from_columns,
    features_from_orders,
)
from etr.repository import ModelArtifact, load_artifact, versions
from etr.runtime import EtrRuntime, Prediction, check_features
from etr.select import load_runtime

__all__ = [
    "FEATURE_NAMES",
    "N_FEATURES",
    "EtrRuntime",
    "ModelArtifact",
    "Prediction",
    "build_features",
    "check_features",
    "features_from_columns",
    "features_from_orders",
    "load_artifact",
    "load_runtime",
    "versions",
]
