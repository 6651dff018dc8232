"""How much of a data file the trainer reads before refusing it: at most so many columns,
and at most so many bytes out of a compressed file. A small hostile file (a header line of
100,000 names; a .gz that inflates a thousand-fold) is then refused with a message naming
the limit and the flag that raises it, before it fills the memory."""

from __future__ import annotations

from dataclasses import dataclass

from bnserve.store.errors import InvalidInput
from bnserve.store.model.names import MAX_NAME_LENGTH

DEFAULT_MAX_COLUMNS = 10_000
COLUMNS_FLAG = "--max-columns"
DECOMPRESSED_FLAG = "--max-decompressed"


@dataclass(frozen=True)
class ReadLimits:
    """None: no limit."""

    max_columns: int | None = DEFAULT_MAX_COLUMNS
    max_decompressed: int | None = None  # bytes out of a .gz (the CLI sets it by --memory-budget)

    def check_columns(self, source: str, count: int, line: int = 1) -> None:
        if self.max_columns is not None and count > self.max_columns:
            raise InvalidInput(
                f"{source}: line {line}: {count:,} columns, more than the limit of {self.max_columns:,} "
                f"({COLUMNS_FLAG} raises it)"
            )

    @property
    def header_chars(self) -> int | None:
        """The longest a header line of at most ``max_columns`` names can be (each quoted,
        with its quotes doubled, and a delimiter): a longer one is refused before it is split."""
        return None if self.max_columns is None else self.max_columns * (2 * MAX_NAME_LENGTH + 3) + 2

    def too_long_header(self, source: str) -> InvalidInput:
        return InvalidInput(
            f"{source}: line 1: the header line is longer than {self.header_chars:,} characters, more than "
            f"{self.max_columns:,} columns can take ({COLUMNS_FLAG} raises the limit)"
        )

    def too_much_decompressed(self, source: str) -> InvalidInput:
        return InvalidInput(
            f"{source}: decompresses to more than {_size(self.max_decompressed or 0)}, the limit "
            f"({DECOMPRESSED_FLAG} raises it)"
        )


DEFAULT_READ_LIMITS = ReadLimits()


def _size(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}".replace(".0 ", " ")
    return f"{n:,} bytes"
