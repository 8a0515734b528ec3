"""Cache tests use the private redis-server fixtures from tests/conftest.py."""
