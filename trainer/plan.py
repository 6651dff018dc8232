"""One training plan: a frozen ``TrainingSpec`` of everything that makes a model, and the one
``train(spec, source)`` that turns it and the data into a ``Model``.

``trainer fit``, ``trainer evaluate`` and ``BayesNetClassifier.fit`` only build specs. The
spec checks itself (``InvalidInput`` naming the flag), so flags and Python callers share one
check; ``train`` chooses the data path (in memory, in chunks, in parts, on Dask) and applies
auto's defaults, here and nowhere else. The spec travels in the model's metadata
(``TRAINING_SPEC``), so a loaded model knows how it was made: ``command`` gives the ``trainer
fit`` line that makes it again.
"""

from __future__ import annotations

import ctypes
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, NUMERIC, UNKNOWN_POLICIES, Model
from bnserve.store.predictor.precision import PRECISIONS, with_table_precision
from bnserve.trainer.data import AVAILABLE_CASE, IMPUTE, MISSING_POLICIES, EncodedData, Preprocessing, TrainingView
from bnserve.trainer.data.budget import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_MEMORY_BUDGET,
    IN_MEMORY_PER_FILE_BYTE,
    chunk_rows_within,
)
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.encoded import from_table, prepare
from bnserve.trainer.data.preprocessing import DEFAULT_NA_VALUES
from bnserve.trainer.data.projections import LDA, PROJECTIONS
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.fit import fit
from bnserve.trainer.io import RawTable, ReadLimits, delimiter_of, is_pattern, read_table
from bnserve.trainer.io.limits import DEFAULT_MAX_COLUMNS
from bnserve.trainer.learners.parameters import Estimator
from bnserve.trainer.learners.registry import (
    AUTO,
    DEFAULT_CANDIDATES,
    DEFAULT_DISCRETIZATIONS,
    DEFAULT_ESTIMATORS,
    DEFAULT_KS,
    DEFAULT_WORK_BUDGET,
    LEARNERS,
    PARAMETERS,
    ROW_FLAGS,
    STREAMABLE,
    check_work_budget,
)
from bnserve.trainer.learners.sizing import DEFAULT_MAX_CPT_CELLS, TrainingLimits

SPEC_VERSION = 1
TRAINING_SPEC = "training_spec"  # the model metadata's key
# what auto reads numeric columns with (a spec's ``discretize`` overrides it), the first of the
# menu its search then chooses from (``auto_search``): MDL, but a column it leaves whole keeps
# up to 16 equal-frequency intervals for the structures that can use it
AUTO_DISCRETIZATION = Method.parse(DEFAULT_DISCRETIZATIONS[0])
BY_BUDGET = "budget"  # max_decompressed: what a file read whole may take within memory_budget
# how the data were taken, not what the model is (the same model in memory, in chunks or on
# Dask, bit for bit): left out of the metadata and of the reproducing command
MACHINE_FIELDS = ("memory_budget", "chunk_rows", "jobs", "dask")

__all__ = [
    "AUTO",
    "AUTO_DISCRETIZATION",
    "DEFAULT_CANDIDATES",
    "DEFAULT_ESTIMATORS",
    "DEFAULT_KS",
    "DEFAULT_WORK_BUDGET",
    "TRAINING_SPEC",
    "DataPath",
    "TrainingSpec",
    "command",
    "data_path",
    "learn",
    "read",
    "spec_of",
    "train",
    "with_auto_discretization",
]


@dataclass(frozen=True)
class TrainingSpec:
    """Everything that makes a model but the data. ``params``: the learner's (``k``, ``alpha``,
    …; auto takes none, its ``ks`` instead). ``estimator``: CPT estimator text (None: laplace;
    under auto, auto's list). ``discretize``: the method for numeric columns (None: mdl; auto's
    ``mdl:16``), ``per_column`` exceptions. ``projections``: derived features (``lda``: the
    numeric columns' linear discriminants; ``none``; None: auto chooses, a learner has none).
    ``work_budget``: auto's search, in cell-fits (None:
    every candidate). ``max_cpt_cells`` and ``memory_budget`` bound every fit (``limits``; None: no
    limit). ``weight`` and ``unknown`` are checked and recorded here; the learners and
    scorers read them."""

    algo: str
    params: Mapping[str, Any] = field(default_factory=dict)
    estimator: str | None = None
    # reading
    class_column: str | None = None
    fmt: str | None = None
    delimiter: str | None = None
    na_values: tuple[str, ...] = DEFAULT_NA_VALUES
    trim: bool = True
    nominal: tuple[str, ...] = ()
    numeric: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    force_class: bool = False
    # what is learned from the columns
    discretize: str | None = None
    per_column: Mapping[str, str] = field(default_factory=dict)
    missing: str = AVAILABLE_CASE
    weight: str | None = None
    unknown: str = DEFAULT_UNKNOWN
    projections: str | None = None
    # auto
    candidates: tuple[str, ...] | None = None
    ks: tuple[int, ...] | None = None
    work_budget: int | None = DEFAULT_WORK_BUDGET
    seed: int = 0
    # the served tables and the limits
    precision: str = "float64"
    max_columns: int | None = DEFAULT_MAX_COLUMNS
    max_decompressed: int | str | None = BY_BUDGET
    max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS
    memory_budget: int | None = DEFAULT_MEMORY_BUDGET
    chunk_rows: int | None = None
    jobs: int = 1
    dask: str | None = None

    def __post_init__(self) -> None:
        for name in ("na_values", "nominal", "numeric", "ignore"):
            object.__setattr__(self, name, tuple(str(v) for v in getattr(self, name)))
        for name in ("candidates", "ks"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "params", {k: v for k, v in dict(self.params).items() if v is not None})
        object.__setattr__(self, "per_column", dict(self.per_column))
        if self.estimator is not None:
            _checked(Estimator.parse, self.estimator, "--estimator")  # kept as given: get_params reads it back
        _check_spec(self)

    @property
    def is_auto(self) -> bool:
        return self.algo == AUTO

    def method(self) -> Method:
        """The discretisation of numeric columns without an exception of their own."""
        if self.discretize is not None:
            return Method.parse(self.discretize)
        return AUTO_DISCRETIZATION if self.is_auto else Method()

    def preprocessing(self, whole: bool = True) -> Preprocessing:
        """How the columns are read and what is learned from them, for a file read ``whole``
        or in chunks (a .gz read in chunks is not limited by the memory budget)."""
        decompressed = self.max_decompressed
        if decompressed == BY_BUDGET:
            budget = self.memory_budget
            decompressed = budget // IN_MEMORY_PER_FILE_BYTE if whole and budget is not None else None
        return Preprocessing(
            self.nominal,
            self.numeric,
            self.ignore,
            self.method(),
            {column: Method.parse(m) for column, m in self.per_column.items()},
            self.missing,
            self.na_values,
            self.trim,
            self.force_class,
            self.delimiter,
            ReadLimits(self.max_columns, decompressed if isinstance(decompressed, int) else None),
            weight=self.weight,
            projections=self.projections,
        )

    @property
    def limits(self) -> TrainingLimits:
        """What every fit of this plan may build (``--max-cpt-cells``, ``--memory-budget``)."""
        return TrainingLimits(self.max_cpt_cells, self.memory_budget)

    @property
    def streams(self) -> bool:
        """Whether the learner needs only counts, so the data may be read in chunks or parts."""
        rows_needed = self.estimator is not None and Estimator.parse(self.estimator).needs_rows
        derived = self.projections == LDA  # learned from the rows' numbers, and coded from them
        return not self.is_auto and LEARNERS[self.algo].streams(self.params) and not rows_needed and not derived

    def to_dict(self) -> dict[str, Any]:
        """JSON values, versioned; what ``from_dict`` reads back (the machine fields left out)."""
        doc: dict[str, Any] = {"version": SPEC_VERSION}
        for f in fields(self):
            if f.name in MACHINE_FIELDS:
                continue
            value = getattr(self, f.name)
            doc[f.name] = list(value) if isinstance(value, tuple) else dict(value) if f.name in _MAPS else value
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> TrainingSpec:
        if doc.get("version") != SPEC_VERSION:
            raise InvalidInput(f"training spec version {doc.get('version')!r}; this bnserve reads {SPEC_VERSION}")
        known = {f.name for f in fields(cls)} - set(MACHINE_FIELDS)
        doc = _work_budget_of_time_budget(doc)
        return cls(**{k: v for k, v in doc.items() if k in known})


def _work_budget_of_time_budget(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """A spec stored before auto's budget was work: its ``time_budget`` None (no limit) is a
    ``work_budget`` of None; seconds have no measure in work, so the default stands in."""
    if "time_budget" not in doc or "work_budget" in doc:
        return doc
    return {**doc, "work_budget": None if doc["time_budget"] is None else DEFAULT_WORK_BUDGET}


_MAPS = ("params", "per_column")


def _checked(parse: Any, value: Any, flag: str) -> Any:
    try:
        return parse(value)
    except InvalidInput as exc:
        raise InvalidInput(f"{flag}: {exc.message}") from None


def _check_spec(spec: TrainingSpec) -> None:
    """Every rule on a spec's fields, each failure one line naming the flag."""
    if spec.algo != AUTO and spec.algo not in LEARNERS:
        raise InvalidInput(f"unknown algo {spec.algo!r}; expected auto or one of {', '.join(LEARNERS)}")
    unknown = [name for name in spec.params if name not in PARAMETERS]
    if unknown:
        raise InvalidInput(f"unknown learner parameter {', '.join(map(repr, unknown))}")
    if spec.is_auto:
        if spec.params:
            flags = [PARAMETERS[n].flag for n in spec.params]
            raise InvalidInput(f"{', '.join(flags)} does not apply to --algo auto")
        unknown = [c for c in spec.candidates or () if c not in LEARNERS]
        if unknown or spec.candidates == ():
            raise InvalidInput(
                f"--candidates: unknown algorithm {', '.join(unknown)}; expected some of {', '.join(LEARNERS)}"
            )
        if spec.ks is not None and (
            not spec.ks or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in spec.ks)
        ):
            raise InvalidInput(f"--k: expected non-negative values, got {list(spec.ks)}")
        check_work_budget(spec.work_budget)
    else:
        if spec.candidates is not None or spec.ks is not None or spec.work_budget != DEFAULT_WORK_BUDGET:
            raise InvalidInput("--candidates and --work-budget apply to --algo auto only")
        for name, value in spec.params.items():
            param = PARAMETERS[name]
            if not LEARNERS[spec.algo].takes(name):
                raise InvalidInput(f"{param.flag} does not apply to --algo {spec.algo}")
            try:
                param.value(value)
            except InvalidInput as exc:
                raise InvalidInput(f"{param.flag} {value}: {exc.message}") from None
    if spec.discretize is not None:
        _checked(Method.parse, spec.discretize, "--discretize")
    for method in spec.per_column.values():
        _checked(Method.parse, method, "--discretize")
    _one_of("--missing", spec.missing, MISSING_POLICIES)
    if spec.projections is not None:
        _one_of("--projections", spec.projections, PROJECTIONS)
    _one_of("unknown (the estimator's handle_unknown)", spec.unknown, UNKNOWN_POLICIES)
    _one_of("--precision", spec.precision, PRECISIONS)
    if spec.delimiter is not None and (len(spec.delimiter) != 1 or spec.delimiter in '\r\n"'):
        raise InvalidInput(f"--delimiter: one character (not a quote or a line end), got {spec.delimiter!r}")
    if spec.weight is not None and not (isinstance(spec.weight, str) and spec.weight):
        raise InvalidInput(f"--weight: expected a column name, got {spec.weight!r}")
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise InvalidInput(f"--seed: expected a non-negative integer, got {spec.seed!r}")
    for flag, value, none_ok in (
        ("--max-columns", spec.max_columns, True),
        ("--max-cpt-cells", spec.max_cpt_cells, True),
        ("--memory-budget", spec.memory_budget, True),
        ("--chunk-rows", spec.chunk_rows, True),
        ("--jobs", spec.jobs, False),
        ("--max-decompressed", None if spec.max_decompressed == BY_BUDGET else spec.max_decompressed, True),
    ):
        if (value is None and not none_ok) or (
            value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1)
        ):
            raise InvalidInput(f"{flag}: expected a positive integer{' or none' if none_ok else ''}, got {value!r}")
    for flag, given in (("--dask", spec.dask), ("--chunk-rows", spec.chunk_rows)):
        if given:
            _check_streams(spec, flag)


def _one_of(flag: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise InvalidInput(f"{flag} must be one of {', '.join(choices)}, got {value!r}")


def _check_streams(spec: TrainingSpec, what: str) -> None:
    """``what`` (a flag, or a set of files) reads the data in chunks: the learner must count only."""
    if spec.estimator is not None and Estimator.parse(spec.estimator).needs_rows:
        raise InvalidInput(f"{what} counts the rows; --estimator {spec.estimator} fits on them: leave one out")
    if not spec.streams:
        raise InvalidInput(
            f"{what} trains {', '.join(STREAMABLE)} (without {', '.join(ROW_FLAGS)}, --projections lda), "
            f"not --algo {spec.algo}{' with those flags' if spec.algo in STREAMABLE else ''}"
        )


# ---------------------------------------------------------------- the data path


Source = str | RawTable  # a file, URL, glob or builtin name; or a table already in memory (the estimator's)


@dataclass(frozen=True)
class DataPath:
    """How ``read`` takes the data: ``chunk_rows`` at a time (None: whole, in memory);
    ``note``: why a file over the memory budget is read whole anyway."""

    chunk_rows: int | None
    note: str | None = None


def data_path(spec: TrainingSpec, source: Source) -> DataPath:
    """The plan's choice: in chunks when asked (``chunk_rows``), for a set of files or a Dask
    cluster, or when a delimited file is over the memory budget and the learner counts only;
    else in memory. A set of files with a learner that needs the rows is refused."""
    if isinstance(source, RawTable):
        return DataPath(None)
    several_files = is_pattern(source)
    if several_files:
        _check_streams(spec, "a set of files")
    if spec.chunk_rows:
        return DataPath(spec.chunk_rows)
    delimited = delimiter_of(source, spec.fmt) is not None
    within = chunk_rows_within(source, spec.memory_budget, spec.jobs) if delimited else None
    if within is not None and spec.streams and spec.missing != IMPUTE:
        return DataPath(within)
    if spec.dask or several_files:
        return DataPath(DEFAULT_CHUNK_ROWS)
    if within is not None:
        return DataPath(
            None,
            f"{source} may need more memory than --memory-budget; it is read whole, since only "
            f"{', '.join(STREAMABLE)} (without {', '.join(ROW_FLAGS)}, --missing impute) train in chunks",
        )
    return DataPath(None)


IN_MEMORY = DataPath(None)


def read(spec: TrainingSpec, source: Source, path: DataPath | None = None) -> TrainingView:
    """The data as the training reads them: typed, discretised (auto: ``AUTO_DISCRETIZATION``
    unless the spec says otherwise), coded; or only their counts, read in chunks."""
    path = path or data_path(spec, source)
    if path.chunk_rows:
        assert isinstance(source, str)
        return load_streamed(
            source, spec.class_column, spec.preprocessing(whole=False), spec.fmt, path.chunk_rows, spec.jobs, spec.dask
        )
    preprocessing = spec.preprocessing()
    if isinstance(source, str):  # read here, and handed over: coded over its positions where it can be
        table = read_table(source, spec.fmt, preprocessing.delimiter, preprocessing.limits)
        data = from_table(table, spec.class_column, preprocessing, consume=True)
        del table
        _give_back_free_memory()
        return data
    return from_table(source, spec.class_column, preprocessing)


def learn(spec: TrainingSpec, data: TrainingView) -> Model:
    """The model ``spec`` makes of ``data`` (as ``read`` gives them), with the spec in its metadata."""
    if spec.is_auto:
        from bnserve.trainer.auto import fit_auto  # its search and scoring: 0.05 s to import, for auto only

        assert isinstance(data, EncodedData)  # auto is never streamed
        candidates, ks, search = auto_search(spec)
        model = fit_auto(
            data, candidates, ks, **search, seed=spec.seed, budget=spec.work_budget, limits=spec.limits, jobs=spec.jobs
        )
    else:
        model = fit(spec.algo, data, spec.estimator, limits=spec.limits, **spec.params)
    model = replace(model, metadata={**model.metadata, TRAINING_SPEC: spec.to_dict()})
    _give_back_free_memory()  # the counts' temporaries, before the model is published
    return with_table_precision(model, spec.precision)


def _give_back_free_memory() -> None:
    """Ask the C allocator to return the pages it keeps free to the system (glibc's
    ``malloc_trim``; nothing where the C library has none). Freed temporaries (the parse's,
    the counts') stay in glibc's heaps and count in the RSS: 14-22 MiB of a 1M-row fit, on
    which the next step's peak would stack. A few milliseconds."""
    trim = getattr(ctypes.CDLL(None), "malloc_trim", None) if sys.platform.startswith("linux") else None
    if trim is not None:  # musl has none
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
        trim(0)


def auto_search(spec: TrainingSpec) -> tuple[list[str], list[int], dict[str, Any]]:
    """Auto's candidates, ks and keyword arguments (estimators, the discretisations it chooses
    from: none when the spec gives one) under ``spec``: auto's defaults where the spec gives
    none, decided here only."""
    estimators = [spec.estimator] if spec.estimator else list(DEFAULT_ESTIMATORS)
    discretizations = list(DEFAULT_DISCRETIZATIONS) if spec.discretize is None else []
    search = {"estimators": estimators, "discretizations": discretizations}
    return list(spec.candidates or DEFAULT_CANDIDATES), list(spec.ks or DEFAULT_KS), search


def train(spec: TrainingSpec, source: Source) -> Model:
    """The one way a model is made: ``read`` on the plan's data path, then ``learn``."""
    return learn(spec, read(spec, source))


def with_auto_discretization(data: EncodedData) -> EncodedData:
    """``data`` prepared again with ``AUTO_DISCRETIZATION`` for its numeric columns (what
    auto reads when the spec gives no ``discretize``: ``trainer evaluate`` reads a file once
    for auto and the other learners); as it is without numeric columns or the raw columns."""
    if data.columns is None or data.preprocessing is None or not any(v.kind == NUMERIC for v in data.features):
        return data
    return prepare(data.columns, replace(data.preprocessing, discretize=AUTO_DISCRETIZATION), data.weights)


# ---------------------------------------------------------------- the spec back from a model


def spec_of(model: Model) -> TrainingSpec | None:
    """The spec recorded in a model's metadata; None for a model published before specs were
    recorded (or imported from a file)."""
    doc = model.metadata.get(TRAINING_SPEC)
    return TrainingSpec.from_dict(doc) if isinstance(doc, Mapping) else None


def command(spec: TrainingSpec, data: str = "DATA", name: str = "NAME") -> str:
    """The ``trainer fit`` line that makes the model of ``spec`` again from ``data``. Every
    flag it prints is one of ``trainer fit``'s; the spec's ``unknown`` is not: it is how the
    estimator scores (``handle_unknown``), not what is learned, and ``trainer predict
    --unknown`` gives it when scoring."""
    default = TrainingSpec(spec.algo)
    words = ["trainer", "fit", "--algo", spec.algo]
    for key, value in spec.params.items():
        words += [PARAMETERS[key].flag, str(value)]
    if spec.ks is not None:  # --k takes one k or a range
        low, high = min(spec.ks), max(spec.ks)
        words += ["--k", str(low) if low == high else f"{low}..{high}"]
    simple = {
        "estimator": "--estimator",
        "class_column": "--class",
        "fmt": "--format",
        "delimiter": "--delimiter",
        "discretize": "--discretize",
        "missing": "--missing",
        "weight": "--weight",
        "projections": "--projections",
        "seed": "--seed",
        "precision": "--precision",
        "max_columns": "--max-columns",
        "max_cpt_cells": "--max-cpt-cells",
    }
    for key, flag in simple.items():
        value = getattr(spec, key)
        if value != getattr(default, key):
            words += [flag, "none" if value is None else str(value)]
    words += ["--data", data]
    for key in ("nominal", "numeric", "ignore"):
        if getattr(spec, key):
            words += [f"--{key}", *getattr(spec, key)]
    for column, method in spec.per_column.items():
        words += ["--discretize", f"{column}={method}"]
    if spec.na_values != default.na_values:
        words += ["--na-values", ",".join(spec.na_values)]
    if not spec.trim:
        words.append("--keep-whitespace")
    if spec.force_class:
        words.append("--force-class")
    if spec.candidates is not None:
        words += ["--candidates", ",".join(spec.candidates)]
    if spec.work_budget != default.work_budget:
        words += ["--work-budget", "none" if spec.work_budget is None else str(spec.work_budget)]
    if spec.max_decompressed != default.max_decompressed:
        words += ["--max-decompressed", "none" if spec.max_decompressed is None else f"{spec.max_decompressed}B"]
    words += ["--name", name]
    return shlex.join(words)
