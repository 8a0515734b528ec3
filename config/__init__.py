"""Process-wide settings read from the environment (the only module that reads os.environ)."""

from config.secrets import read_secret
from config.settings import Settings, get_settings

__all__ = ["Settings", "get_settings", "read_secret"]
