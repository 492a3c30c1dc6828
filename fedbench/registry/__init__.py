"""The run registry: SQLAlchemy tables (``tables``, migrated by ``schema``) and the ``Registry`` callers use (SQLite by
default, any SQLAlchemy URL), made of three parts: how it is opened (``connection``), who may train and write a run
(``claims``), and what is stored about runs and read back (``store``)."""

from fedbench.registry.claims import Claims
from fedbench.registry.connection import default_registry_url
from fedbench.registry.store import Store


class Registry(Claims, Store):
    """The registry at ``url`` (``Connection``: read-only or for writing), with its claims and its stored runs."""


__all__ = ["Registry", "default_registry_url"]
