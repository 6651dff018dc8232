"""How raw columns become states, as the user asks for it: forced types, ignored columns,
the discretisation method per numeric column and the missing-value policy."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bnserve.trainer.data.discretize import Method

AVAILABLE_CASE = "available-case"
IMPUTE = "impute"
STATE = "state"
MISSING_POLICIES = (AVAILABLE_CASE, IMPUTE, STATE)


@dataclass(frozen=True)
class Preprocessing:
    """How raw columns become states. ``nominal``/``numeric`` force a column's type,
    ``ignore`` drops columns; ``discretize`` is the method for numeric columns, with
    per-column exceptions in ``per_column``; ``missing`` is available-case (each count uses
    the rows where its variables are present), impute (modes and means, training only) or
    state (a feature with missing values in the training rows gets a state "missing", learned
    and served like the others; Weka's BayesNet does this)."""

    nominal: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    discretize: Method = Method()  # noqa: RUF009 (frozen: one shared default is safe)
    per_column: Mapping[str, Method] = field(default_factory=dict)
    missing: str = AVAILABLE_CASE

    def method(self, column: str) -> Method:
        return self.per_column.get(column, self.discretize)

    def describe(self, numeric_columns: Sequence[str]) -> dict:
        """What the model's metadata records about its preprocessing."""
        return {
            "missing": self.missing,
            "discretization": {name: str(self.method(name)) for name in numeric_columns},
            **({"ignored": list(self.ignore)} if self.ignore else {}),
        }
