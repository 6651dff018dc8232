"""Mapped rows of the model store: thin, one class per table, no behaviour.

Relational where people query (models, versions, aliases, tags, variables, arcs), one
blob per CPT. A version's rows are keyed by ``(model_id, version)`` and never change once
written (a delete removes them all); only ``model_aliases`` rows move. The schema itself is created by the alembic
migrations in ``store/migrations``; a test checks that the two agree.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    LargeBinary,
    PrimaryKeyConstraint,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from bnserve.store.signing import KEY_ID_HEX, SIGNATURE_HEX

MODEL_NAME_LENGTH = 128  # also the alias length
SYMBOL_LENGTH = 256  # variable names, algorithm names (store.model.MAX_NAME_LENGTH)
SHA256_HEX_LENGTH = 64
TAG_VALUE_LENGTH = 256  # store.model.names.TAG_VALUE_LENGTH


def _of_version(table: str) -> ForeignKeyConstraint:
    """A row of one version: its ``(model_id, version)`` names a row of ``model_versions``."""
    return ForeignKeyConstraint(
        ["model_id", "version"], ["model_versions.model_id", "model_versions.version"], name=f"fk_{table}_version"
    )


class Base(DeclarativeBase):
    pass


class SqlModel(Base):
    """A named model; its versions hang off ``id``. ``last_version`` is the highest version
    ever published, so a deleted version's number is never given to another; the row stays
    when every version is deleted, to keep it. ``writes`` counts the write transactions on
    the model (publish, alias moves, deletes), each in its own transaction, so a poll reads
    only the models whose count moved."""

    __tablename__ = "models"

    id: Mapped[int] = mapped_column(Integer, autoincrement=True)
    name: Mapped[str] = mapped_column(String(MODEL_NAME_LENGTH), nullable=False)
    created_at_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    last_version: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))
    writes: Mapped[int] = mapped_column(Integer, nullable=False, server_default=text("0"))

    __table_args__ = (
        PrimaryKeyConstraint("id", name="pk_models"),
        UniqueConstraint("name", name="uq_models_name"),
    )


class SqlModelVersion(Base):
    """One immutable version: the scalar parts of the Model and the checksum over all of it,
    the publisher's ``description`` (outside the model and its checksum), and, when the
    publisher signed it, the key id and the signature (``bnserve.store.signing``)."""

    __tablename__ = "model_versions"

    model_id: Mapped[int] = mapped_column(Integer, ForeignKey("models.id", name="fk_model_versions_model"))
    version: Mapped[int] = mapped_column(Integer)
    algorithm: Mapped[str] = mapped_column(String(SYMBOL_LENGTH), nullable=False)
    combination: Mapped[str] = mapped_column(String(32), nullable=False)
    class_variable: Mapped[str] = mapped_column(String(SYMBOL_LENGTH), nullable=False)
    params_json: Mapped[str] = mapped_column(Text, nullable=False)
    metadata_json: Mapped[str] = mapped_column(Text, nullable=False)
    checksum: Mapped[str] = mapped_column(String(SHA256_HEX_LENGTH), nullable=False)
    created_at_ms: Mapped[int] = mapped_column(BigInteger, nullable=False)
    description: Mapped[str | None] = mapped_column(Text, nullable=True)
    signature_key: Mapped[str | None] = mapped_column(String(KEY_ID_HEX), nullable=True)
    signature: Mapped[str | None] = mapped_column(String(SIGNATURE_HEX), nullable=True)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "version", name="pk_model_versions"),
        CheckConstraint("version >= 1", name="ck_model_versions_version_positive"),
    )


class SqlModelAlias(Base):
    """alias -> version of one model; the only rows that are ever updated."""

    __tablename__ = "model_aliases"

    model_id: Mapped[int] = mapped_column(Integer)
    alias: Mapped[str] = mapped_column(String(MODEL_NAME_LENGTH))
    version: Mapped[int] = mapped_column(Integer, nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "alias", name="pk_model_aliases"),
        _of_version("model_aliases"),
    )


class SqlModelVersionTag(Base):
    """key = value on one version, given at publish time (``--tag``); outside the model's checksum,
    inside the version's signature when it is signed."""

    __tablename__ = "model_version_tags"

    model_id: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(MODEL_NAME_LENGTH))
    value: Mapped[str] = mapped_column(String(TAG_VALUE_LENGTH), nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "version", "key", name="pk_model_version_tags"),
        _of_version("model_version_tags"),
    )


class SqlVariable(Base):
    """A variable of a version, in model order; ``states_json`` is the ordered label list,
    ``cuts_json`` the ascending cut points of a numeric variable (NULL for a nominal one),
    ``missing_state`` whether the last state is the one a missing value takes,
    ``projection_json`` a derived feature's inputs, centres and weights (NULL for any other)."""

    __tablename__ = "variables"

    model_id: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(SYMBOL_LENGTH), nullable=False)
    role: Mapped[str] = mapped_column(String(16), nullable=False)
    kind: Mapped[str] = mapped_column(String(16), nullable=False)
    states_json: Mapped[str] = mapped_column(Text, nullable=False)
    cuts_json: Mapped[str | None] = mapped_column(Text, nullable=True)
    missing_state: Mapped[bool] = mapped_column(Boolean, nullable=False, server_default=false())
    projection_json: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "version", "position", name="pk_variables"),
        UniqueConstraint("model_id", "version", "name", name="uq_variables_name"),
        _of_version("variables"),
    )


class SqlCpt(Base):
    """One node of one network: its position in the network and its CPT as a blob.

    ``data`` is little-endian C-order bytes of ``dtype`` with ``shape_json`` (node, *parents);
    ``sha256`` is over ``data`` alone.
    """

    __tablename__ = "cpts"

    model_id: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    network: Mapped[int] = mapped_column(Integer)
    node: Mapped[str] = mapped_column(String(SYMBOL_LENGTH))
    node_position: Mapped[int] = mapped_column(Integer, nullable=False)
    dtype: Mapped[str] = mapped_column(String(16), nullable=False)
    shape_json: Mapped[str] = mapped_column(Text, nullable=False)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)
    sha256: Mapped[str] = mapped_column(String(SHA256_HEX_LENGTH), nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "version", "network", "node", name="pk_cpts"),
        UniqueConstraint("model_id", "version", "network", "node_position", name="uq_cpts_position"),
        _of_version("cpts"),
        ForeignKeyConstraint(
            ["model_id", "version", "node"],
            ["variables.model_id", "variables.version", "variables.name"],
            name="fk_cpts_variable",
        ),
    )


class SqlArc(Base):
    """parent -> child in one network; ``position`` is the parent's CPT axis (0 = first parent)."""

    __tablename__ = "arcs"

    model_id: Mapped[int] = mapped_column(Integer)
    version: Mapped[int] = mapped_column(Integer)
    network: Mapped[int] = mapped_column(Integer)
    child: Mapped[str] = mapped_column(String(SYMBOL_LENGTH))
    position: Mapped[int] = mapped_column(Integer)
    parent: Mapped[str] = mapped_column(String(SYMBOL_LENGTH), nullable=False)

    __table_args__ = (
        PrimaryKeyConstraint("model_id", "version", "network", "child", "position", name="pk_arcs"),
        UniqueConstraint("model_id", "version", "network", "child", "parent", name="uq_arcs_parent"),
        ForeignKeyConstraint(
            ["model_id", "version", "network", "child"],
            ["cpts.model_id", "cpts.version", "cpts.network", "cpts.node"],
            name="fk_arcs_child",
        ),
        ForeignKeyConstraint(
            ["model_id", "version", "network", "parent"],
            ["cpts.model_id", "cpts.version", "cpts.network", "cpts.node"],
            name="fk_arcs_parent",
        ),
    )
