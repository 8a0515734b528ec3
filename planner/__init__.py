"""Rounds as domain types in, plans out: a round to arrays, the round pipeline and the round
generator."""

from planner.dispatch_round import dispatch_round
from planner.round_generator import generate_round
from planner.round_to_arrays import PackedRound, pack_round

__all__ = ["PackedRound", "dispatch_round", "generate_round", "pack_round"]
