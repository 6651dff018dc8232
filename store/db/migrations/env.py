"""Alembic environment for the model store.

At runtime ``bnserve.store.db.schema.upgrade_to_head`` passes an open connection, already inside
a transaction (and, on PostgreSQL, holding the migration lock), in
``config.attributes["connection"]``. From the alembic command line, set
``sqlalchemy.url`` in the config instead.
"""

from __future__ import annotations

from alembic import context

from bnserve.store.db.engine import create_store_engine
from bnserve.store.db.tables import Base

config = context.config
target_metadata = Base.metadata


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set sqlalchemy.url to the store's URL (or run `trainer db upgrade --store URL`)")
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
