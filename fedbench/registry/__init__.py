"""The run registry: SQLAlchemy tables and the Registry API (SQLite by default, any URL)."""

from fedbench.registry.api import Registry, default_registry_url

__all__ = ["Registry", "default_registry_url"]
