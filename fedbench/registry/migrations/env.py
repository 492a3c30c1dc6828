"""Alembic environment for the fedbench registry. Migrations run on the connection fedbench hands over
(``fedbench.registry.schema.upgrade``); there is no alembic.ini and no offline mode."""

from alembic import context

from fedbench.registry.tables import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
