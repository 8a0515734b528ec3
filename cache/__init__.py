"""Multi-level result cache: L1 in each replica's memory, L2 in Redis shared by all."""

from cache.breaker import BreakerState, CircuitBreaker
from cache.codec import CacheDecodeError, decode, encode
from cache.keys import Quantisation, cache_key
from cache.l1 import L1Cache
from cache.l2_redis import RedisL2
from cache.multilevel import MultiLevelCache
from cache.stats import CacheStats

__all__ = [
    "BreakerState",
    "CacheDecodeError",
    "CacheStats",
    "CircuitBreaker",
    "L1Cache",
    "MultiLevelCache",
    "Quantisation",
    "RedisL2",
    "cache_key",
    "decode",
    "encode",
]
