"""The model store: publish, resolve, load, alias, list and delete model versions in a SQL database.

Modelled on MLflow's registry ``SqlAlchemyStore``: the mapped rows (``tables``) never
leave a session; callers get plain ``ModelVersion``, ``ModelSummary``, ``VersionSummary``
and ``Deleted`` objects. Reads see one snapshot of the store for their whole transaction.
Every public method validates its arguments, then runs one transaction through
``_transaction``, which owns commit, rollback and close and turns database errors into
``bnserve.store.errors`` kinds. Writes that lose a race on a unique key are retried as a whole,
in a fresh transaction, a few times before giving up with ``Conflict``.
"""

from __future__ import annotations

import logging
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

from sqlalchemy import CursorResult, Engine, Row, delete, func, insert, select, tuple_, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session, sessionmaker

from bnserve.store.db.engine import create_store_engine, writer
from bnserve.store.db.failures import RACE, first_line, kind_of, translate
from bnserve.store.db.rows import (
    ARC_COLUMNS,
    CPT_COLUMNS,
    VARIABLE_COLUMNS,
    Decoder,
    Values,
    check_value_sizes,
    model_to_rows,
    rows_to_model,
)
from bnserve.store.db.schema import UPGRADE_COMMAND, check_schema
from bnserve.store.db.tables import (
    SqlArc,
    SqlCpt,
    SqlModel,
    SqlModelAlias,
    SqlModelVersion,
    SqlModelVersionTag,
    SqlVariable,
)
from bnserve.store.db.url import parse_store_url, redacted
from bnserve.store.errors import (
    BnServeError,
    Conflict,
    InUse,
    InvalidInput,
    NotFound,
    SchemaMismatch,
)
from bnserve.store.model import Model
from bnserve.store.model.names import (
    check_alias,
    check_description,
    check_model_name,
    check_selector,
    check_tags,
    check_version,
    resolve_version,
)
from bnserve.store.signing import KeyRing, Signature, SigningKey, signed_message
from bnserve.store.timeouts import DEFAULT_TIMEOUTS, StoreTimeouts

log = logging.getLogger(__name__)

WRITE_ATTEMPTS = 5
CHANGED_MODELS_BY_ID = 500  # a poll reads the rows of up to this many changed models by id, more in full
LOAD_CHUNK = 400  # versions per select of load_many: 800 values bound, under SQLite's oldest limit (999)

VersionKey = tuple[str, int]  # (model name, version)
RowsByVersion = dict[tuple[int, int], list[Values]]  # (model id, version) -> its rows

T = TypeVar("T")


@dataclass(frozen=True)
class ModelVersion:
    """One loaded, verified version."""

    name: str
    version: int
    created_at_ms: int
    checksum: str
    aliases: tuple[str, ...]  # the aliases pointing at this version, sorted
    model: Model
    description: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)  # sorted by key
    signature: Signature | None = None  # None: unsigned


@dataclass(frozen=True)
class ModelSummary:
    """A model's catalogue entry; read without touching any blob."""

    name: str
    versions: tuple[int, ...]  # ascending, never empty
    aliases: Mapping[str, int]  # alias -> version

    @property
    def latest_version(self) -> int:
        return self.versions[-1]


@dataclass(frozen=True)
class CatalogueMark:
    """Where a reader of the catalogue stands: each model's write count as last read."""

    writes: Mapping[str, int]  # model name -> models.writes
    total: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "total", sum(self.writes.values()))


@dataclass(frozen=True)
class CatalogueChanges:
    """What ``ModelStore.catalogue_changes`` read, in one transaction."""

    mark: CatalogueMark  # pass it as ``since`` to read only what is written after this read
    models: Mapping[str, ModelSummary | None]  # the models read; None: one without versions (all deleted)


@dataclass(frozen=True)
class VersionSummary:
    """One version's catalogue row (``trainer list``); read without touching any blob."""

    name: str
    version: int
    created_at_ms: int
    algorithm: str
    aliases: tuple[str, ...]  # sorted
    description: str | None
    tags: Mapping[str, str]  # sorted by key


@dataclass(frozen=True)
class Deleted:
    """What ``ModelStore.delete`` removed."""

    name: str
    versions: tuple[int, ...]  # ascending
    aliases: Mapping[str, int]  # the aliases removed with them (force), alias -> version


class _WriteRace(Conflict):
    """A concurrent transaction took the same unique key; retry the whole transaction."""


class ModelStore:
    """Versioned models in SQLite or PostgreSQL.

    Opening checks the schema (``schema.check_schema``) and never migrates it, so a role
    that may only read can open a store; ``create`` sets up an empty database (a writer's
    first publish into a new store). ``timeouts`` bound every wait for the database.
    With ``verify``, ``load`` and ``load_many`` refuse (IntegrityError) every version not
    signed by one of its keys over exactly what is stored: a server's ``--verify-key``.
    """

    def __init__(
        self,
        url: str,
        *,
        create: bool = False,
        timeouts: StoreTimeouts = DEFAULT_TIMEOUTS,
        verify: KeyRing | None = None,
    ):
        self._raw_url = url  # never shown: errors about it pass through redacted
        self._url = redacted(url)
        self._verify = verify
        if not create:
            _check_sqlite_file(url)
        self._engine = create_store_engine(url, timeouts)
        try:
            check_schema(self._engine, self._url, create=create)
        except sa_exc.SQLAlchemyError as exc:
            self._engine.dispose()
            raise _translate(exc, f"opening the store at {self._url}", url) from exc
        except BaseException:
            self._engine.dispose()
            raise
        self._reads = sessionmaker(_snapshot_reads(self._engine), expire_on_commit=False)
        self._writes = sessionmaker(writer(self._engine), expire_on_commit=False)
        log.info("model store open at %s", self._url)

    def __repr__(self) -> str:
        return f"ModelStore({self._url!r})"

    def __enter__(self) -> ModelStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.dispose()

    @property
    def engine(self) -> Engine:
        return self._engine

    def dispose(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    # ------------------------------------------------------------------ writes

    def publish(
        self,
        name: str,
        model: Model,
        aliases: Sequence[str] = (),
        *,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
        signer: SigningKey | None = None,
    ) -> int:
        """Write ``model`` as the next version of ``name`` (created if new); returns that version.

        The number is one above the highest ever published, deleted ones included.
        ``aliases`` are pointed at the new version in the same transaction; ``description``
        and ``tags`` are stored with it, outside the model and its checksum. ``signer`` signs
        the name, number, checksum, description and tags (``signing.signed_message``), once
        the number is taken.
        """
        check_model_name(name)
        description = check_description(description)
        tags = check_tags({} if tags is None else tags)
        if isinstance(aliases, str):
            raise InvalidInput(
                f"publishing model {name!r}: aliases must be a list of names, got the string {aliases!r}"
            )
        aliases = tuple(dict.fromkeys(check_alias(a) for a in aliases))
        if not isinstance(model, Model):
            raise InvalidInput(f"publishing model {name!r}: expected a store.model.Model, got {type(model).__name__}")
        model.validate()
        check_value_sizes(name, model)
        rows = model_to_rows(model)

        def write(session: Session) -> int:
            model_id = _lock_model(session, name, create=True)
            version = _take_next_version(session, model_id)
            keyed = rows.keyed(model_id, version, _now_ms())
            signed = {}
            if signer is not None:
                signature = signer.sign(signed_message(name, version, rows.header["checksum"], description, tags))
                signed = {"signature_key": signature.key_id, "signature": signature.value}
            session.execute(insert(SqlModelVersion), [{**keyed.header, "description": description, **signed}])
            tag_rows = [{"model_id": model_id, "version": version, "key": k, "value": v} for k, v in tags.items()]
            for table, values in (
                (SqlModelVersionTag, tag_rows),
                (SqlVariable, keyed.variables),
                (SqlCpt, keyed.cpts),
                (SqlArc, keyed.arcs),
            ):
                if values:
                    session.execute(insert(table), values)
            for alias in aliases:
                _point_alias(session, model_id, alias, version)
            return version

        version = self._write(f"publishing model {name!r}", write)
        log.info(
            "published %s version %d (%s)%s%s",
            name,
            version,
            model.algorithm,
            f" as {', '.join(aliases)}" if aliases else "",
            f", signed by key {signer.key_id}" if signer is not None else "",
        )
        return version

    def set_alias(self, name: str, alias: str, version: int) -> None:
        """Point ``alias`` of model ``name`` at an existing ``version`` (created or moved)."""
        check_model_name(name)
        check_alias(alias)
        version = check_version(version)

        def write(session: Session) -> None:
            model_id = _lock_model(session, name, create=False)
            if session.get(SqlModelVersion, (model_id, version)) is None:
                raise NotFound(f"model {name!r} has no version {version}")
            _point_alias(session, model_id, alias, version)

        self._write(f"setting alias {alias!r} of model {name!r}", write)
        log.info("alias %s of %s -> version %d", alias, name, version)

    def remove_alias(self, name: str, alias: str) -> int:
        """Remove ``alias`` of model ``name``; returns the version it pointed at. A server
        stops answering for it on its next poll (the version stays, under its number)."""
        check_model_name(name)
        check_alias(alias)

        def write(session: Session) -> int:
            model_id = _lock_model(session, name, create=False)  # the model's row locked: no move meanwhile
            where = (SqlModelAlias.model_id == model_id, SqlModelAlias.alias == alias)
            version = session.scalar(select(SqlModelAlias.version).where(*where))
            if version is None:
                raise NotFound(f"model {name!r} has no alias {alias!r}")
            session.execute(delete(SqlModelAlias).where(*where))
            return int(version)

        version = self._write(f"removing alias {alias!r} of model {name!r}", write)
        log.info("alias %s of %s removed (was version %d)", alias, name, version)
        return version

    def delete(self, name: str, version: int | None = None, *, force: bool = False) -> Deleted:
        """Delete one version of ``name``, or every version when ``version`` is None.

        Refused (InUse, naming them) while an alias points at a version to delete, unless
        ``force``, which removes those aliases too. NotFound for a model without versions
        or a missing version. The numbers are not reused: the next publish continues after
        the highest ever published. A server drops what was deleted on its next poll.
        """
        check_model_name(name)
        version = None if version is None else check_version(version)
        what = f"deleting model {name!r}" + ("" if version is None else f" version {version}")

        def write(session: Session) -> Deleted:
            model_id = _lock_model(session, name, create=False)  # no publish or alias move meanwhile
            held = set(session.scalars(select(SqlModelVersion.version).where(SqlModelVersion.model_id == model_id)))
            if not held:
                raise NotFound(f"model {name!r} not found")
            if version is not None and version not in held:
                raise NotFound(f"model {name!r} has no version {version}")
            doomed = sorted(held) if version is None else [version]
            aliases = dict(
                session.execute(
                    select(SqlModelAlias.alias, SqlModelAlias.version)
                    .where(SqlModelAlias.model_id == model_id, SqlModelAlias.version.in_(doomed))
                    .order_by(SqlModelAlias.alias)
                ).all()
            )
            if aliases and not force:
                named = ", ".join(f"{a} (version {v})" for a, v in aliases.items())
                raise InUse(
                    f"{what}: still named by the alias{'es' if len(aliases) > 1 else ''} {named}; "
                    "move or remove them first (trainer alias, unalias), or force the delete, "
                    "which removes them too (trainer delete --force)"
                )
            # children before parents, as the foreign keys run: arcs -> cpts -> variables -> versions
            for table in (SqlModelAlias, SqlArc, SqlCpt, SqlVariable, SqlModelVersionTag, SqlModelVersion):
                session.execute(delete(table).where(table.model_id == model_id, table.version.in_(doomed)))
            return Deleted(name, tuple(doomed), aliases)

        deleted = self._write(what, write)
        log.info(
            "deleted %s version%s %s%s",
            name,
            "s" if len(deleted.versions) > 1 else "",
            ", ".join(map(str, deleted.versions)),
            f" and its aliases {', '.join(deleted.aliases)}" if deleted.aliases else "",
        )
        return deleted

    # ------------------------------------------------------------------ reads

    def resolve(self, name: str, version: int | None = None, alias: str | None = None) -> int:
        """The version a selector names: ``version`` if it exists; ``alias``'s version;
        neither: the ``production`` alias if set, else the latest version. NotFound otherwise."""
        version, alias = check_selector(name, version, alias)
        with self._transaction(f"resolving model {name!r}") as session:
            return _resolve(session, name, version, alias)[1]

    def load(self, name: str, version: int | None = None, alias: str | None = None) -> ModelVersion:
        """Read one version (same selector rules as ``resolve``), verify its checksums, validate it.

        Raises IntegrityError naming the node whose stored bytes changed, or, with ``verify``,
        the version whose signature is missing, of another key or not over what is stored;
        InvalidModel if the stored model breaks the contract.
        """
        version, alias = check_selector(name, version, alias)
        with self._transaction(f"loading model {name!r}") as session:
            number = _resolve(session, name, version, alias)[1]
            read = self._read(session, [(name, number)], Decoder())[(name, number)]
        loaded = _validated(read)
        if isinstance(loaded, Exception):
            raise loaded
        return loaded

    def load_many(self, versions: Iterable[VersionKey]) -> dict[VersionKey, ModelVersion | Exception]:
        """Read many versions, each verified and validated as ``load`` does one, in six selects
        per ``LOAD_CHUNK`` versions (``load`` makes nine per version): a server's start.

        Each (name, version) maps to its ModelVersion or to the error ``load`` raises for it
        (NotFound when the store has no such version), so a bad version is refused alone; a
        failure of the store itself raises.
        """
        wanted = list(dict.fromkeys((check_model_name(name), check_version(version)) for name, version in versions))
        read: dict[VersionKey, ModelVersion | Exception] = {}
        decoder = Decoder()  # what the versions' rows repeat, decoded once
        with self._transaction(f"loading {len(wanted)} model versions") as session:
            for start in range(0, len(wanted), LOAD_CHUNK):
                read.update(self._read(session, wanted[start : start + LOAD_CHUNK], decoder))
        return {key: _validated(read[key]) for key in wanted}

    def list_models(self) -> list[ModelSummary]:
        """Every model with its versions and aliases, sorted by name."""
        models = self.catalogue_changes().models.values()
        return sorted((s for s in models if s is not None), key=lambda s: s.name)

    def catalogue_changes(self, since: CatalogueMark | None = None) -> CatalogueChanges:
        """The catalogue entries of the models written since ``since`` (a previous answer's
        ``mark``); of every model when it is None.

        A poll with nothing written costs one aggregate row: each write transaction counts
        in its model's ``models.writes`` (``_lock_model``), which only grows, and rows are
        never deleted, so the count of rows and the sum of the counts move on every write.
        A writer that does not count (a trainer of a release before schema 0005, rows written
        by hand) is not seen here: a reader that must see it reads in full now and then.
        """
        with self._transaction("listing models") as session:
            # One snapshot for every read (_snapshot_reads): every aliased version read
            # here is in the versions read, whatever publishes and deletes commit meanwhile.
            if since is not None:
                count, total = session.execute(select(func.count(), func.coalesce(func.sum(SqlModel.writes), 0))).one()
                if (count, total) == (len(since.writes), since.total):
                    return CatalogueChanges(since, {})
            marks = session.execute(select(SqlModel.id, SqlModel.name, SqlModel.writes)).all()
            changed = {i: name for i, name, writes in marks if since is None or since.writes.get(name) != writes}
            few = since is not None and len(changed) <= CHANGED_MODELS_BY_ID
            alias_read = select(SqlModelAlias.model_id, SqlModelAlias.alias, SqlModelAlias.version)
            version_read = select(SqlModelVersion.model_id, SqlModelVersion.version)
            if few:
                alias_read = alias_read.where(SqlModelAlias.model_id.in_(changed))
                version_read = version_read.where(SqlModelVersion.model_id.in_(changed))
            alias_rows = session.execute(alias_read).all()
            version_rows = session.execute(version_read).all()
        versions: dict[int, list[int]] = defaultdict(list)
        for model_id, version in version_rows:
            versions[model_id].append(version)
        aliases: dict[int, dict[str, int]] = defaultdict(dict)
        for model_id, alias, version in alias_rows:
            aliases[model_id][alias] = version
        models = {
            name: (
                ModelSummary(name, tuple(sorted(versions[model_id])), dict(sorted(aliases[model_id].items())))
                if versions[model_id]
                else None
            )
            for model_id, name in changed.items()
        }
        return CatalogueChanges(CatalogueMark({name: writes for _, name, writes in marks}), models)

    def list_versions(self, name: str | None = None) -> list[VersionSummary]:
        """One row per version, by name then version; of model ``name`` only if given
        (NotFound when it has no versions). Reads no CPT blob."""
        if name is not None:
            check_model_name(name)
        with self._transaction("listing versions") as session:
            where = () if name is None else (SqlModel.name == name,)
            headers = session.execute(
                select(
                    SqlModel.name,
                    SqlModelVersion.model_id,
                    SqlModelVersion.version,
                    SqlModelVersion.created_at_ms,
                    SqlModelVersion.algorithm,
                    SqlModelVersion.description,
                )
                .join(SqlModel, SqlModel.id == SqlModelVersion.model_id)
                .where(*where)
                .order_by(SqlModel.name, SqlModelVersion.version)
            ).all()
            ids = {h.model_id for h in headers}
            alias_rows = session.execute(
                select(SqlModelAlias.model_id, SqlModelAlias.version, SqlModelAlias.alias).where(
                    SqlModelAlias.model_id.in_(ids)
                )
            ).all()
            tag_rows = session.execute(
                select(
                    SqlModelVersionTag.model_id,
                    SqlModelVersionTag.version,
                    SqlModelVersionTag.key,
                    SqlModelVersionTag.value,
                )
                .where(SqlModelVersionTag.model_id.in_(ids))
                .order_by(SqlModelVersionTag.key)
            ).all()
        if name is not None and not headers:
            raise NotFound(f"model {name!r} not found")
        aliases: dict[tuple[int, int], list[str]] = defaultdict(list)
        for model_id, version, alias in alias_rows:
            aliases[(model_id, version)].append(alias)
        tags: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
        for model_id, version, key, value in tag_rows:
            tags[(model_id, version)][key] = value
        return [
            VersionSummary(
                h.name,
                h.version,
                h.created_at_ms,
                h.algorithm,
                tuple(sorted(aliases[(h.model_id, h.version)])),
                h.description,
                tags[(h.model_id, h.version)],
            )
            for h in headers
        ]

    def _read(
        self, session: Session, keys: Sequence[VersionKey], decoder: Decoder
    ) -> dict[VersionKey, ModelVersion | Exception]:
        """The versions ``keys`` rebuilt from their rows in six selects, whatever their number,
        each with its checksums and (with ``verify``) its signature verified, not validated; a
        version that fails maps to its error, one missing to NotFound."""
        read: dict[VersionKey, ModelVersion | Exception] = {
            (name, version): NotFound(f"model {name!r} has no version {version}") for name, version in keys
        }
        headers = session.execute(
            select(SqlModel.name, SqlModelVersion.__table__)
            .join(SqlModel, SqlModel.id == SqlModelVersion.model_id)
            .where(
                SqlModel.name.in_({name for name, _ in keys}), tuple_(SqlModel.name, SqlModelVersion.version).in_(keys)
            )
        ).all()
        if not headers:
            return read
        ids = [(h.model_id, h.version) for h in headers]
        variables = _rows_by_version(session, SqlVariable, VARIABLE_COLUMNS, ids, "position")
        cpts = _rows_by_version(session, SqlCpt, CPT_COLUMNS, ids, "network", "node_position")
        arcs = _rows_by_version(session, SqlArc, ARC_COLUMNS, ids, "network", "child", "position")
        aliases = _rows_by_version(session, SqlModelAlias, ("alias",), ids)
        tags = _rows_by_version(session, SqlModelVersionTag, ("key", "value"), ids)
        for header in headers:
            key = (header.model_id, header.version)
            try:
                read[(header.name, header.version)] = self._verified(
                    header, variables[key], cpts[key], arcs[key], aliases[key], tags[key], decoder
                )
            except Exception as exc:  # this version alone is refused: the others load
                read[(header.name, header.version)] = exc
        return read

    def _verified(
        self,
        header: Row[Any],
        variables: list[Values],
        cpts: list[Values],
        arcs: list[Values],
        aliases: list[Values],
        tags: list[Values],
        decoder: Decoder,
    ) -> ModelVersion:
        """One version from its rows: the model with its checksums verified, then its signature."""
        model = rows_to_model(header.name, header, variables, cpts, arcs, decoder)
        tag_values = dict(sorted((key, value) for _, _, key, value in tags))
        signature = None
        if header.signature_key is not None or header.signature is not None:
            signature = Signature(header.signature_key or "", header.signature or "")
        if self._verify is not None:
            self._verify.check(header.name, header.version, header.checksum, header.description, tag_values, signature)
        return ModelVersion(
            header.name,
            header.version,
            header.created_at_ms,
            header.checksum,
            tuple(sorted(alias for _, _, alias in aliases)),
            model,
            header.description,
            tag_values,
            signature,
        )

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def _transaction(self, what: str, *, write: bool = False) -> Iterator[Session]:
        """One transaction: commit on success, roll back on any error, always close.

        Database errors leave as store.errors kinds whose message starts with ``what``.
        """
        session = (self._writes if write else self._reads)()
        try:
            yield session
            session.commit()
        except sa_exc.SQLAlchemyError as exc:
            _rollback_quietly(session)
            raise _translate(exc, what, self._raw_url) from exc
        except BaseException:
            _rollback_quietly(session)
            raise
        finally:
            session.close()

    def _write(self, what: str, work: Callable[[Session], T]) -> T:
        """Run ``work`` in a write transaction, retrying it in a fresh one after a lost race."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self._transaction(what, write=True) as session:
                    return work(session)
            except _WriteRace as exc:
                if attempt == WRITE_ATTEMPTS:
                    raise Conflict(f"{what}: lost to concurrent writers {WRITE_ATTEMPTS} times; try again") from exc
                log.debug("%s: attempt %d lost a race (%s); retrying", what, attempt, exc.message)
                time.sleep(random.uniform(0.0, 0.02 * attempt))
        raise AssertionError("unreachable")


def _snapshot_reads(engine: Engine) -> Engine:
    """The engine for read transactions, each of which sees one snapshot throughout, so that
    a listing or a load never mixes rows from before and after a concurrent publish or delete.
    PostgreSQL: REPEATABLE READ (a transaction that only reads is never refused for it);
    SQLite in WAL mode already reads so."""
    if engine.dialect.name == "postgresql":
        return engine.execution_options(isolation_level="REPEATABLE READ")
    return engine


def _check_sqlite_file(url: str) -> None:
    """A SQLite store that is to be read must exist: connecting would create an empty file
    at a mistyped path, and a server would serve nothing from it without a word."""
    parsed = parse_store_url(url)
    path = parsed.database
    if parsed.get_backend_name() == "sqlite" and path and path != ":memory:" and not path.startswith("file:"):
        if not os.path.exists(path):
            raise SchemaMismatch(
                redacted(
                    url,
                    f"no store at {url}: the file {path} does not exist (a mistyped path?); "
                    f"a new store is created by its first `trainer fit`, or by `{UPGRADE_COMMAND}`",
                )
            )


# ---------------------------------------------------------------------- inside a session


def _lock_model(session: Session, name: str, *, create: bool) -> int:
    """The model's id, its row locked for this transaction (PostgreSQL; SQLite's BEGIN
    IMMEDIATE already serialises writers) and this write counted in ``models.writes``, which
    ``catalogue_changes`` polls: every write to a model's catalogue comes through here.
    Creates the row if asked, else NotFound."""
    model_id = session.scalar(
        update(SqlModel).where(SqlModel.name == name).values(writes=SqlModel.writes + 1).returning(SqlModel.id)
    )
    if model_id is not None:
        return model_id
    if not create:
        raise NotFound(f"model {name!r} not found")
    row = SqlModel(name=name, created_at_ms=_now_ms(), writes=1)
    session.add(row)
    session.flush()  # a concurrent creator makes this a unique violation: the caller retries
    return row.id


def _point_alias(session: Session, model_id: int, alias: str, version: int) -> None:
    moved: CursorResult = session.execute(  # type: ignore[assignment]  # an UPDATE's result has a rowcount
        update(SqlModelAlias)
        .where(SqlModelAlias.model_id == model_id, SqlModelAlias.alias == alias)
        .values(version=version)
    )
    if moved.rowcount == 0:
        session.execute(insert(SqlModelAlias), [{"model_id": model_id, "alias": alias, "version": version}])


def _resolve(session: Session, name: str, version: int | None, alias: str | None) -> tuple[int, int]:
    """(model id, version) for a checked selector, by ``resolve_version``; NotFound naming what is missing."""
    model_id = session.scalar(select(SqlModel.id).where(SqlModel.name == name))
    versions = session.scalars(select(SqlModelVersion.version).where(SqlModelVersion.model_id == model_id)).all()
    if model_id is None or not versions:  # no such name, or every version deleted (the row stays)
        raise NotFound(f"model {name!r} not found")
    aliases = dict(
        session.execute(
            select(SqlModelAlias.alias, SqlModelAlias.version).where(SqlModelAlias.model_id == model_id)
        ).all()
    )
    return model_id, resolve_version(name, versions, aliases, version, alias)


def _take_next_version(session: Session, model_id: int) -> int:
    """The next version number of a model whose row this transaction has locked: one above
    the highest ever published (``models.last_version``), so a deleted number is never reused,
    and above every version the table holds: a version written by a writer that does not keep
    ``last_version`` (a trainer of the release before schema 0004, during a rolling upgrade)
    is not taken twice."""
    last = session.scalar(select(SqlModel.last_version).where(SqlModel.id == model_id))
    highest = session.scalar(select(func.max(SqlModelVersion.version)).where(SqlModelVersion.model_id == model_id))
    version = max(last or 0, highest or 0) + 1
    session.execute(update(SqlModel).where(SqlModel.id == model_id).values(last_version=version))
    return version


def _rows_by_version(
    session: Session, table: Any, columns: Sequence[str], ids: Sequence[tuple[int, int]], *order: str
) -> RowsByVersion:
    """The rows ``(model_id, version, *columns)`` of ``table`` (mapped) of the versions ``ids``
    (model id, version), in the columns ``order`` within each version: one select of plain rows
    (mapped objects cost more than the rest of a load), through the index on (model_id, version, ...)."""
    c = table.__table__.c
    query = (
        select(c.model_id, c.version, *(c[name] for name in columns))
        .where(c.model_id.in_({m for m, _ in ids}), tuple_(c.model_id, c.version).in_(ids))
        .order_by(c.model_id, c.version, *(c[name] for name in order))
    )
    rows = session.execute(query).all()
    return defaultdict(list, {key: list(group) for key, group in groupby(rows, key=itemgetter(0, 1))})


def _validated(read: ModelVersion | Exception) -> ModelVersion | Exception:
    """A read version once its model passes ``validate()``, else why not; run outside the
    transaction, as it reads no rows."""
    if isinstance(read, Exception):
        return read
    try:
        read.model.validate()
    except Exception as exc:
        return exc
    return read


# ---------------------------------------------------------------------- helpers


def _translate(exc: sa_exc.SQLAlchemyError, what: str, store: str) -> BnServeError:
    """``translate``, but a lost race on a unique key is ``_WriteRace``: retried by ``_write``."""
    if kind_of(exc) == RACE:
        detail = redacted(store, first_line(exc))
        return _WriteRace(f"{what}: a concurrent write took the same key ({detail})")
    return translate(exc, what, store)


def _rollback_quietly(session: Session) -> None:
    try:
        session.rollback()
    except sa_exc.SQLAlchemyError:
        log.warning("rollback failed; the connection is discarded", exc_info=True)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
