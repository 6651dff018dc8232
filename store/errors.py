"""The few error kinds every layer raises; the server maps each to one gRPC status.

Each class carries the same fields (``message``, ``code``) so a mapper never has to
guess. ``code`` is a gRPC status name, kept as a string so ``store`` needs no grpc.
"""

from __future__ import annotations


class BnServeError(Exception):
    """Base of every error we raise on purpose."""

    code = "INTERNAL"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InvalidInput(BnServeError):
    """The caller sent something malformed (bad name, label, shape, flag)."""

    code = "INVALID_ARGUMENT"


class NotFound(BnServeError):
    """A model, version, alias or variable that does not exist."""

    code = "NOT_FOUND"


class InvalidModel(BnServeError):
    """A model that breaks the contract: cyclic DAG, wrong CPT shape, rows not normalised."""

    code = "FAILED_PRECONDITION"


class IntegrityError(BnServeError):
    """Stored bytes whose checksum does not match: the version is refused at load."""

    code = "DATA_LOSS"


class StoreUnavailable(BnServeError):
    """The database cannot be reached, is locked, timed out or is short of resources; the
    caller may retry."""

    code = "UNAVAILABLE"


class ClusterUnavailable(BnServeError):
    """The compute cluster (Dask) could not do the work: unreachable, silent past its timeout,
    without workers, or its workers died. Not the caller's fault; a later try may succeed."""

    code = "UNAVAILABLE"


class StoreRefused(BnServeError):
    """The database refused the work for a reason retrying cannot mend: a constraint of its
    own (not a lost race), a schema that is not this code's, a corrupt file. An operator, or
    a different request, must act."""

    code = "FAILED_PRECONDITION"


class PermissionDenied(BnServeError):
    """The database refused the store's own role an operation (e.g. a write by a role that may only read)."""

    code = "PERMISSION_DENIED"


class SchemaMismatch(BnServeError):
    """A store whose schema this code cannot use: none yet, or behind (run the migrations)."""

    code = "FAILED_PRECONDITION"


class InUse(BnServeError):
    """A delete of a version an alias still names (remove or move the alias, or force it)."""

    code = "FAILED_PRECONDITION"


class Conflict(BnServeError):
    """A write lost a race it could not win by retrying."""

    code = "ABORTED"


class TooComplex(BnServeError):
    """Work that would need more memory than a fixed bound allows (exact marginalisation of
    many linked missing values): refused before it starts."""

    code = "RESOURCE_EXHAUSTED"
