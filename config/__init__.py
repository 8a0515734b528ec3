"""Process-wide settings read from the environment (the only package that reads os.environ;
``ops.local`` writes the environment of the Ray processes it starts)."""

from config.secrets import read_env, read_file, read_secret
from config.settings import BackendChoice, Settings, backend_for, get_settings

__all__ = [
    "BackendChoice",
    "Settings",
    "backend_for",
    "get_settings",
    "read_env",
    "read_file",
    "read_secret",
]
