"""Process-wide settings read from the environment (the only module that reads os.environ)."""

from config.settings import Settings, get_settings

__all__ = ["Settings", "get_settings"]
