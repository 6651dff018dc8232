"""Lifecycle: versions can be deleted without their numbers being reused, and carry a
description and tags.

``models.last_version`` keeps the highest version ever published (set here from the
versions a store holds); ``model_versions.description`` and ``model_version_tags`` hold
what ``--description`` and ``--tag`` give at publish time.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN: a batch copy would drop tables that others' foreign
    # keys name, which SQLite refuses with foreign keys on and rows in them.
    op.add_column("models", sa.Column("last_version", sa.Integer(), nullable=False, server_default=sa.text("0")))
    op.execute(
        "UPDATE models SET last_version = COALESCE("
        "(SELECT MAX(model_versions.version) FROM model_versions WHERE model_versions.model_id = models.id), 0)"
    )
    op.add_column("model_versions", sa.Column("description", sa.Text(), nullable=True))
    op.create_table(
        "model_version_tags",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(128), nullable=False),
        sa.Column("value", sa.String(256), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", "key", name="pk_model_version_tags"),
        sa.ForeignKeyConstraint(
            ["model_id", "version"],
            ["model_versions.model_id", "model_versions.version"],
            name="fk_model_version_tags_version",
        ),
    )


def downgrade() -> None:
    # Plain ALTER TABLE … DROP COLUMN (SQLite 3.35+), for the same reason.
    op.drop_table("model_version_tags")
    op.drop_column("model_versions", "description")
    op.drop_column("models", "last_version")
