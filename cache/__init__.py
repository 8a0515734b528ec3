"""Multi-level result cache (L1 in-process, L2 Redis). Not built yet."""
