"""Initial schema: models, versions, aliases, variables, CPT blobs, arcs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = sa.String(128)
SYMBOL = sa.String(256)
SHA256 = sa.String(64)


def _version_key() -> list[sa.Column]:
    return [sa.Column("model_id", sa.Integer(), nullable=False), sa.Column("version", sa.Integer(), nullable=False)]


def _to_version(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["model_id", "version"], ["model_versions.model_id", "model_versions.version"], name=f"fk_{table}_version"
    )


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", NAME, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_models"),
        sa.UniqueConstraint("name", name="uq_models_name"),
    )
    op.create_table(
        "model_versions",
        *_version_key(),
        sa.Column("algorithm", SYMBOL, nullable=False),
        sa.Column("combination", sa.String(32), nullable=False),
        sa.Column("class_variable", SYMBOL, nullable=False),
        sa.Column("params_json", sa.Text(), nullable=False),
        sa.Column("metadata_json", sa.Text(), nullable=False),
        sa.Column("checksum", SHA256, nullable=False),
        sa.Column("created_at_ms", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", name="pk_model_versions"),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], name="fk_model_versions_model"),
        sa.CheckConstraint("version >= 1", name="ck_model_versions_version_positive"),
    )
    op.create_table(
        "model_aliases",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("alias", NAME, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "alias", name="pk_model_aliases"),
        _to_version("model_aliases"),
    )
    op.create_table(
        "variables",
        *_version_key(),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("name", SYMBOL, nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("states_json", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", "position", name="pk_variables"),
        sa.UniqueConstraint("model_id", "version", "name", name="uq_variables_name"),
        _to_version("variables"),
    )
    op.create_table(
        "cpts",
        *_version_key(),
        sa.Column("network", sa.Integer(), nullable=False),
        sa.Column("node", SYMBOL, nullable=False),
        sa.Column("node_position", sa.Integer(), nullable=False),
        sa.Column("dtype", sa.String(16), nullable=False),
        sa.Column("shape_json", sa.Text(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("sha256", SHA256, nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", "network", "node", name="pk_cpts"),
        sa.UniqueConstraint("model_id", "version", "network", "node_position", name="uq_cpts_position"),
        _to_version("cpts"),
        sa.ForeignKeyConstraint(
            ["model_id", "version", "node"],
            ["variables.model_id", "variables.version", "variables.name"],
            name="fk_cpts_variable",
        ),
    )
    op.create_table(
        "arcs",
        *_version_key(),
        sa.Column("network", sa.Integer(), nullable=False),
        sa.Column("child", SYMBOL, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("parent", SYMBOL, nullable=False),
        sa.PrimaryKeyConstraint("model_id", "version", "network", "child", "position", name="pk_arcs"),
        sa.UniqueConstraint("model_id", "version", "network", "child", "parent", name="uq_arcs_parent"),
        *(
            sa.ForeignKeyConstraint(
                ["model_id", "version", "network", end],
                ["cpts.model_id", "cpts.version", "cpts.network", "cpts.node"],
                name=f"fk_arcs_{end}",
            )
            for end in ("child", "parent")
        ),
    )


def downgrade() -> None:
    for table in ("arcs", "cpts", "variables", "model_aliases", "model_versions", "models"):
        op.drop_table(table)
