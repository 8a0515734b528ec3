"""Real meal-delivery days (Grubhub's MDRP instances): loading, a round-by-round replay through
our dispatch, the library's solution files, and an evaluator that shares no code with the
replay."""

from planner.mdrp.evaluate import MdrpEvaluation, evaluate
from planner.mdrp.instance import MdrpInstance, MdrpInstanceError, load_instance
from planner.mdrp.replay import Replay, ReplayPolicy, replay
from planner.mdrp.solution import write_solution

__all__ = [
    "MdrpEvaluation",
    "MdrpInstance",
    "MdrpInstanceError",
    "Replay",
    "ReplayPolicy",
    "evaluate",
    "load_instance",
    "replay",
    "write_solution",
]
