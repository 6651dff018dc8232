"""Signed versions: ``model_versions.signature_key`` (the signer's key id) and
``model_versions.signature`` (Ed25519, hex) over the version's name, number, checksum,
description and tags (``bnserve.store.signing``). NULL for an unsigned version, as every
version written before this revision is.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN, as in 0004: a batch copy would drop a table others' foreign keys name.
    op.add_column("model_versions", sa.Column("signature_key", sa.String(16), nullable=True))
    op.add_column("model_versions", sa.Column("signature", sa.String(128), nullable=True))


def downgrade() -> None:
    op.drop_column("model_versions", "signature")
    op.drop_column("model_versions", "signature_key")
