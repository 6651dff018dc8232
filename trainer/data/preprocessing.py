"""How raw columns become states, as the user asks for it: which texts are missing and
whether whitespace counts, forced types, ignored columns, the discretisation method per
numeric column, the missing-value policy and the column of row weights."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bnserve.store.model.markers import DEFAULT_MISSING_MARKERS, NA_VALUES
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.missing import AVAILABLE_CASE
from bnserve.trainer.data.projections import LDA
from bnserve.trainer.io import DEFAULT_READ_LIMITS, ReadLimits

if TYPE_CHECKING:
    from bnserve.trainer.io import RawTable

DEFAULT_NA_VALUES = DEFAULT_MISSING_MARKERS  # beside the empty text, always missing: R's, pandas' and Weka's


@dataclass(frozen=True)
class Preprocessing:
    """How raw columns become states. ``nominal``/``numeric`` force a column's type,
    ``ignore`` drops columns; ``discretize`` is the method for numeric columns, with
    per-column exceptions in ``per_column``; ``missing`` is available-case (each count uses
    the rows where its variables are present), impute (modes and means, training only) or
    state (a feature with missing values in the training rows gets a state "missing", learned
    and served like the others; Weka's BayesNet does this). ``weight`` names a column of
    row weights (``weights``): not a feature; each row counts as its weight. ``projections``:
    ``lda`` adds the numeric columns' linear discriminants as derived features (``projections``),
    ``none`` adds none; None adds none either, and lets ``--algo auto`` choose (``binning``)."""

    nominal: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    discretize: Method = Method()  # noqa: RUF009 (frozen: one shared default is safe)
    per_column: Mapping[str, Method] = field(default_factory=dict)
    missing: str = AVAILABLE_CASE
    na_values: tuple[str, ...] = DEFAULT_NA_VALUES  # texts read as missing, beside ""
    trim: bool = True  # whitespace around a text dropped (" Male" is "Male")
    force_class: bool = False  # take a numeric class, or one of very many values, as it is
    delimiter: str | None = None  # a CSV or TSV file's field separator, when not its format's
    limits: ReadLimits = DEFAULT_READ_LIMITS  # the most columns and decompressed bytes read
    weight: str | None = None  # the column of row weights (non-negative numbers), not a feature
    projections: str | None = None  # derived features from the numeric columns: lda; none; None: auto's choice

    def method(self, column: str) -> Method:
        return self.per_column.get(column, self.discretize)

    def cleaned(self, table: RawTable) -> RawTable:
        """``table`` as this preprocessing reads its texts: trimmed, missing markers made ""."""
        return table.cleaned(frozenset(self.na_values), self.trim)

    def describe(self, numeric_columns: Sequence[str]) -> dict:
        """What the model's metadata records about its preprocessing; the missing markers
        always, so scoring and the server read as training did whatever the default becomes."""
        return {
            "missing": self.missing,
            "discretization": {name: str(self.method(name)) for name in numeric_columns},
            **({"ignored": list(self.ignore)} if self.ignore else {}),
            NA_VALUES: list(self.na_values),
            **({"trim_whitespace": False} if not self.trim else {}),
            **({"projections": self.projections} if self.projections == LDA else {}),
        }
