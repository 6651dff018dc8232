"""Features trained with ``--missing state``: their last state is the one a missing value takes.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE (no batch copy): SQLite refuses to drop and copy ``variables``
    # while ``cpts`` rows name it, so a batch upgrade fails on any store holding a model.
    op.add_column("variables", sa.Column("missing_state", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    op.drop_column("variables", "missing_state")  # SQLite 3.35+
