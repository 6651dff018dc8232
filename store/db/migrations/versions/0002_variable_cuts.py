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
    with op.batch_alter_table("variables") as batch:
        batch.add_column(sa.Column("cuts_json", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("variables") as batch:
        batch.drop_column("cuts_json")
