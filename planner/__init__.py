"""Rounds as domain types in, plans out: packing, the round pipeline and the round generator."""

from planner.dispatch_round import dispatch_round
from planner.packing import PackedRound, pack_round
from planner.round_generator import generate_round

__all__ = ["PackedRound", "dispatch_round", "generate_round", "pack_round"]
