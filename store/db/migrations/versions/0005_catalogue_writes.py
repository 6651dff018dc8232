"""Catalogue writes: ``models.writes`` counts the write transactions on each model (publish,
alias moves, deletes), so a server's poll reads only the models whose count moved
(``ModelStore.catalogue_changes``) instead of the whole catalogue.

Existing rows start at 0; a writer of an earlier release does not count, and a server
still sees its writes on its next full read of the catalogue.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN, as in 0004: a batch copy would drop a table others' foreign keys name.
    op.add_column("models", sa.Column("writes", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.drop_column("models", "writes")
