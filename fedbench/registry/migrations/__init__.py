"""Alembic migrations of the registry (env.py, versions/): run by ``fedbench.registry.schema`` when a registry is opened."""
