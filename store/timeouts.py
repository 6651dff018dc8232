"""How long a store call may wait for its database, so that a database that hangs (a
network partition, a lock never released) fails the call with StoreUnavailable instead of
holding it, and whatever it holds, for good. Both command lines take the same two flags.

- connect: to open a connection (PostgreSQL: libpq's ``connect_timeout``, whole seconds, at
  least 2; also the longest wait for a free pooled connection).
- statement: one statement. PostgreSQL cancels it after this long (``statement_timeout``);
  the client stops waiting a connect timeout later, when the server's answer has not come
  (it was lost: the network is partitioned), and closes that connection. SQLite waits this
  long for another writer's lock (its busy timeout). 0: no limit.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from bnserve.argtypes import positive_seconds
from bnserve.store.errors import InvalidInput

NO_LIMIT_SQLITE_MS = 2**31 - 1  # SQLite's busy timeout is an int of milliseconds; 0 would not wait at all


@dataclass(frozen=True)
class StoreTimeouts:
    connect_seconds: float = 10.0
    statement_seconds: float = 30.0  # 0: no limit

    def __post_init__(self) -> None:
        if not (self.connect_seconds > 0 and math.isfinite(self.connect_seconds)):
            raise InvalidInput(
                f"the store connect timeout must be a positive number of seconds, got {self.connect_seconds}"
            )
        if not (self.statement_seconds >= 0 and math.isfinite(self.statement_seconds)):
            raise InvalidInput(
                f"the store statement timeout must be 0 (no limit) or a positive number of seconds, "
                f"got {self.statement_seconds}"
            )

    @property
    def libpq_connect_timeout(self) -> int:
        """libpq counts whole seconds and takes less than 2 as 2."""
        return max(2, math.ceil(self.connect_seconds))

    @property
    def answer_seconds(self) -> float | None:
        """How long a PostgreSQL client waits for any answer: the statement timeout, then a
        connect timeout for the server's cancellation to arrive. None: no limit."""
        return self.statement_seconds + self.connect_seconds if self.statement_seconds else None

    @property
    def sqlite_busy_ms(self) -> int:
        return round(self.statement_seconds * 1000) if self.statement_seconds else NO_LIMIT_SQLITE_MS


DEFAULT_TIMEOUTS = StoreTimeouts()


def add_timeout_flags(parser: argparse.ArgumentParser) -> None:
    """--store-connect-timeout and --store-statement-timeout (dests store_connect_timeout and
    store_statement_timeout), as ``trainer`` and ``server serve`` both take them."""
    parser.add_argument(
        "--store-connect-timeout",
        type=positive_seconds(),
        default=DEFAULT_TIMEOUTS.connect_seconds,
        metavar="SECONDS",
        help="longest wait to connect to the store; a store that does not answer is an error "
        "(default %(default)s; PostgreSQL rounds up to whole seconds, at least 2)",
    )
    parser.add_argument(
        "--store-statement-timeout",
        type=positive_seconds(zero=True),
        default=DEFAULT_TIMEOUTS.statement_seconds,
        metavar="SECONDS",
        help="longest one store statement may run (PostgreSQL: statement_timeout, and the client gives up "
        "a connect timeout later; SQLite: the wait for a lock); 0: no limit (default %(default)s)",
    )


def timeouts_of(args: argparse.Namespace) -> StoreTimeouts:
    return StoreTimeouts(args.store_connect_timeout, args.store_statement_timeout)
