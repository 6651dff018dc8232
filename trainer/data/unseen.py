"""Values unseen in training that were read as missing (``bnserve.store.model.unseen``),
counted per column with a few examples, for the line ``trainer predict`` prints."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

MAX_EXAMPLES = 3  # distinct values shown per column
MAX_EXAMPLE_CHARS = 20  # a longer value is cut, and ends with "…"


@dataclass
class UnseenValues:
    """Per column (in order of first sight): how many values were read as missing, and the
    first ``MAX_EXAMPLES`` distinct ones."""

    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)
    more: set[str] = field(default_factory=set)  # columns with more distinct values than shown

    def add(self, column: str, n: int, values: Iterable[str]) -> None:
        """Count ``n`` more of ``column``; ``values``: distinct examples among them."""
        self.counts[column] = self.counts.get(column, 0) + n
        shown = self.examples.setdefault(column, [])
        for value in values:
            if value in shown:
                continue
            if len(shown) == MAX_EXAMPLES:
                self.more.add(column)
                break
            shown.append(value)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """E.g. ``3 unknown values read as missing: Time 2 ('72', '84'), Purpose 1 ('repairs')``:
        values cut to ``MAX_EXAMPLE_CHARS`` and quoted as Python does (control characters escaped)."""
        parts = []
        for column, n in self.counts.items():
            shown = [_short(v) for v in self.examples.get(column, [])]
            more = ", …" if column in self.more else ""
            parts.append(f"{column} {n:,} ({', '.join(shown)}{more})")
        plural = "value" if self.total == 1 else "values"
        return f"{self.total:,} unknown {plural} read as missing: {', '.join(parts)}"


def _short(value: str) -> str:
    return repr(value if len(value) <= MAX_EXAMPLE_CHARS else value[:MAX_EXAMPLE_CHARS] + "…")
