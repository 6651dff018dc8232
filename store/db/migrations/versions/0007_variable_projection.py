"""Derived features: ``variables.projection_json`` holds a derived feature's inputs, centres
and weights (``bnserve.store.model.projection``); NULL for every other variable, as for
every variable written before this revision.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-28
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN, as in 0003: a batch copy would drop a table others' foreign keys name.
    op.add_column("variables", sa.Column("projection_json", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("variables", "projection_json")  # SQLite 3.35+
