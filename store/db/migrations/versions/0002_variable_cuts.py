"""Numeric variables: the cut points that turn a raw number into an interval state.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE (no batch copy): SQLite refuses to drop and copy ``variables``
    # while ``cpts`` rows name it, so a batch upgrade fails on any store holding a model.
    op.add_column("variables", sa.Column("cuts_json", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("variables", "cuts_json")  # SQLite 3.35+
