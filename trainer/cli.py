"""``trainer`` command line: fit and publish, evaluate, predict (batch scoring), list, show, alias, delete, import, export.

Exit codes: 0 ok, 1 data or store error, 2 usage error. Our own errors print one line on
stderr, never a traceback. Bad input is rejected before anything is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn

from bnserve.store.errors import BnServeError, InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, UNKNOWN_POLICIES, Model
from bnserve.store.model.names import check_alias, check_description, check_model_name, check_tags, parse_ref
from bnserve.store.model.serialization import structure_dict
from bnserve.store.predictor.precision import FLOAT32_ERROR_BOUND, PRECISIONS, with_table_precision
from bnserve.store.timeouts import add_timeout_flags, timeouts_of
from bnserve.store.version import VersionAction
from bnserve.trainer import data as data_io
from bnserve.trainer.auto import (
    DEFAULT_BUDGET,
    DEFAULT_CANDIDATES,
    DEFAULT_ESTIMATORS,
    DEFAULT_KS,
    cross_validate_auto,
    fit_auto,
    with_auto_discretization,
)
from bnserve.trainer.data import AVAILABLE_CASE, IMPUTE, MISSING_POLICIES, Preprocessing
from bnserve.trainer.data.budget import (
    DEFAULT_CHUNK_ROWS,
    DEFAULT_MEMORY_BUDGET,
    IN_MEMORY_PER_FILE_BYTE,
    chunk_rows_within,
    parse_size,
)
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.preprocessing import DEFAULT_NA_VALUES
from bnserve.trainer.data.streaming import load_streamed
from bnserve.trainer.data.summary import summary_text
from bnserve.trainer.evaluation.cross_validation import Evaluation, cross_validate_many, holdout
from bnserve.trainer.fit import fit
from bnserve.trainer.formats import (
    CPT_CELLS_FLAG,
    DEFAULT_MAX_CPT_CELLS,
    EXPORT_FORMATS,
    IMPORT_FORMATS,
    format_of,
    read_model,
    write_model,
)
from bnserve.trainer.io import FORMATS, ReadLimits, delimiter_of, is_pattern
from bnserve.trainer.io.limits import COLUMNS_FLAG, DECOMPRESSED_FLAG, DEFAULT_MAX_COLUMNS
from bnserve.trainer.learners.parameters import Estimator
from bnserve.trainer.learners.registry import LEARNERS, PARAMETERS
from bnserve.trainer.progress import reporting, terminal_bars

PROG = "trainer"
NO_LIMIT = "none"  # --max-decompressed none, told apart from not given (None)
AUTO = "auto"
DASK_ENV = "BNSERVE_DASK_SCHEDULER"
STREAMABLE = [name for name, learner in LEARNERS.items() if learner.counts_only]
ROW_FLAGS = [p.flag for p in PARAMETERS.values() if p.needs_rows]


class UsageError(Exception):
    """A bad command line: exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage and sys.exit(2)
        raise UsageError(message)


def _delimiter(text: str) -> str:
    """One character; ``tab`` or ``\\t`` for a tab."""
    text = "\t" if text in ("tab", "\\t") else text
    if len(text) != 1 or text in '\r\n"':
        raise argparse.ArgumentTypeError(f"a delimiter is one character (not a quote or a line end), got {text!r}")
    return text


def _texts(text: str) -> tuple[str, ...]:
    """A comma-separated list of texts ('' for none)."""
    return tuple(t for t in text.split(",") if t)


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a positive integer, got 0")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Learn Bayesian network classifiers and publish them to the model store.")
    parser.add_argument("--version", action=VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def learning_flags(p: argparse.ArgumentParser, several: bool) -> None:
        if several:
            p.add_argument(
                "--algo",
                required=True,
                type=_algorithms_or_auto,
                metavar="ALGO[,ALGO…]",
                help=f"structure learners, comma-separated: {', '.join(LEARNERS)}; or auto, "
                "scored by nested cross-validation (its choice made on each training fold)",
            )
        else:
            p.add_argument(
                "--algo",
                required=True,
                choices=[*LEARNERS, AUTO],
                help="structure learner, or auto: choose one (and k) by cross-validation",
            )
        for param in PARAMETERS.values():
            p.add_argument(param.flag, dest=param.name, type=param.type, help=_param_help(param.name))
        p.add_argument(
            "--data",
            required=True,
            metavar="FILE",
            nargs="+" if several else None,
            help="data file: CSV, TSV, ARFF or Parquet (by extension, .gz ok), a URL (s3://…), a glob of files "
            "with the same columns (fit), or builtin:chess" + ("; several for a comparison" if several else ""),
        )
        p.add_argument("--class", dest="class_column", metavar="COLUMN", help="class column (default: the last)")
        _reading_flags(p)
        p.add_argument(
            "--nominal", action="extend", nargs="+", default=[], metavar="COLUMN", help="treat these columns as nominal"
        )
        p.add_argument(
            "--numeric",
            action="extend",
            nargs="+",
            default=[],
            metavar="COLUMN",
            help="treat these columns as numeric (discretised)",
        )
        p.add_argument(
            "--ignore", action="extend", nargs="+", default=[], metavar="COLUMN", help="leave these columns out"
        )
        p.add_argument(
            "--discretize",
            action="append",
            default=[],
            metavar="[COLUMN=]METHOD",
            help="mdl (default), mdl:N (a column MDL leaves whole gets N equal-frequency intervals; "
            "--algo auto's default is mdl:16), equal-frequency:N or equal-width:N; for every numeric "
            "column, or COLUMN=METHOD for one",
        )
        p.add_argument(
            "--estimator",
            type=_estimator,
            metavar="EST",
            help="how counts become CPTs: laplace (default), dirichlet:A (A per cell; Weka: 0.5), "
            "m:M (m-estimate towards the marginal), hdp or hdp:SWEEPS (hierarchical Dirichlet process, "
            "Petitjean et al. 2018), alr or alr:LAMBDA (discriminative CPTs fitted to P(class | x), "
            "Zaidi et al. 2017; not with --chunk-rows); recorded in the model's metadata",
        )
        _quiet_flag(p)
        p.add_argument(
            "--missing",
            choices=MISSING_POLICIES,
            default=AVAILABLE_CASE,
            help="training: available-case (default), impute (modes and means) "
            "or state (missing is a state of its own, learned and served)",
        )
        p.add_argument(
            "--force-class",
            action="store_true",
            help="train on a class column that is numeric, or has more than 256 values (refused by default)",
        )

    p = sub.add_parser("fit", help="learn a model and publish it as a new version")
    learning_flags(p, several=False)
    p.add_argument("--name", required=True, help="model name in the store")
    _store_flag(p)
    _alias_flag(p)
    _annotation_flags(p)
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float64",
        help="dtype of the served log tables: float64 (default), float32 (half the memory), or auto "
        f"(float32 where the posteriors move by at most {FLOAT32_ERROR_BOUND:g}); recorded in the metadata",
    )
    p.add_argument(
        "--chunk-rows",
        type=_positive,
        metavar="N",
        help=f"train without holding the file: read it N rows at a time ({', '.join(STREAMABLE)}; CSV, TSV or Parquet)",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=os.environ.get(DASK_ENV) or None,
        help="count the data on the workers of this Dask scheduler (e.g. tcp://scheduler:8786; default "
        f"${DASK_ENV}): the parts of --data, read by the workers, which must reach it too; "
        f"{', '.join(STREAMABLE)} only (pip install 'bnserve[dask]')",
    )
    p.add_argument(
        "--jobs",
        type=_positive,
        default=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
        metavar="N",
        help="processes that read and count the parts of data trained in chunks (the files of a glob; a local "
        "CSV or TSV of at least 8 MiB a part, with no quote character; default: the cores this process may run "
        "on; not with --dask)",
    )
    p.add_argument(
        "--memory-budget",
        type=_size,
        default=DEFAULT_MEMORY_BUDGET,
        metavar="SIZE",
        help="a CSV or TSV file estimated to need more memory than this is streamed in chunks, by the "
        f"learners that can ({', '.join(STREAMABLE)}): e.g. 512MiB, 4GiB; none: always in memory (default 1GiB)",
    )
    p.add_argument(
        "--candidates",
        type=_algorithms,
        metavar="ALGO[,ALGO…]",
        help=f"auto: the learners to choose from (default {','.join(DEFAULT_CANDIDATES)}; nb always)",
    )
    p.add_argument(
        "--time-budget",
        type=_positive_seconds,
        default=DEFAULT_BUDGET,
        metavar="SECONDS",
        help=f"auto: start no new candidate after this many seconds of search (default {DEFAULT_BUDGET:g}); "
        "the winner's final fit comes on top",
    )
    p.set_defaults(run=_fit)

    p = sub.add_parser(
        "predict",
        help="score a data file with a model version: the predicted class and each class's probability per row",
    )
    p.add_argument("ref", metavar="NAME[:VERSION|@ALIAS]")
    p.add_argument(
        "--data",
        required=True,
        metavar="FILE",
        help="the rows to score: CSV, TSV, Parquet (read in chunks) or ARFF, with a column per feature of the "
        "model; the class column is optional (when there, the accuracy is reported)",
    )
    p.add_argument(
        "--out",
        metavar="FILE",
        help="write here, as CSV (.csv) or Parquet (.parquet), instead of CSV on stdout",
    )
    p.add_argument(
        "--keep",
        action="extend",
        nargs="+",
        default=[],
        metavar="COLUMN",
        help="copy these input columns (an identifier, the true class) into the output, before the prediction",
    )
    p.add_argument(
        "--chunk-rows",
        type=_positive,
        default=DEFAULT_CHUNK_ROWS,
        metavar="N",
        help=f"read, score and write N rows at a time (default {DEFAULT_CHUNK_ROWS:,})",
    )
    p.add_argument(
        "--unknown",
        choices=UNKNOWN_POLICIES,
        default=DEFAULT_UNKNOWN,
        help="a value no training row had: 'missing' reads it as missing (summed out) and counts it on stderr; "
        "'error' refuses the file, naming the column and value (default %(default)s)",
    )
    _reading_flags(p, as_trained=True)
    _quiet_flag(p)
    _store_flag(p)
    p.set_defaults(run=_predict)

    p = sub.add_parser("evaluate", help="cross-validate or hold-out test learners on data sets; writes no model")
    learning_flags(p, several=True)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--folds", type=_positive, default=10, help="stratified CV folds (default 10)")
    how.add_argument("--test", metavar="FILE", help="score on this file instead of cross-validating (one --data)")
    p.add_argument("--repeats", type=_positive, default=1, help="repeat the CV with seeds SEED, SEED+1, … (default 1)")
    p.add_argument("--seed", type=_non_negative, default=0, help="fold shuffling seed (default 0)")
    p.add_argument(
        "--per-class",
        action="store_true",
        help="under each learner: its confusion matrix and each class's precision, recall and F1 (always in --json)",
    )
    p.add_argument("--json", dest="json_out", metavar="OUT", help="also write every figure as JSON to OUT")
    p.add_argument(
        "--candidates",
        type=_algorithms,
        metavar="ALGO[,ALGO…]",
        help=f"auto: the learners to choose from (default {','.join(DEFAULT_CANDIDATES)}; nb always)",
    )
    p.set_defaults(run=_evaluate)

    p = sub.add_parser("list", help="list the model versions in the store, one row each")
    p.add_argument("name", nargs="?", metavar="NAME", help="only this model's versions")
    _store_flag(p)
    p.add_argument("--json", action="store_true", help="print a JSON list, one object per version")
    p.set_defaults(run=_list)

    p = sub.add_parser("show", help="show one model version")
    p.add_argument("ref", metavar="NAME[:VERSION|@ALIAS]")
    _store_flag(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--json", action="store_true", help="print JSON")
    how.add_argument("--dot", action="store_true", help="print the DAG as Graphviz DOT")
    p.set_defaults(run=_show)

    p = sub.add_parser("alias", help="point an alias at a version")
    p.add_argument("name")
    p.add_argument("version", type=_positive)
    p.add_argument("alias")
    _store_flag(p)
    p.set_defaults(run=_alias)

    p = sub.add_parser("unalias", help="remove an alias (the version it named stays)")
    p.add_argument("name")
    p.add_argument("alias")
    _store_flag(p)
    p.set_defaults(run=_unalias)

    p = sub.add_parser("delete", help="delete a model version, or every version of a model")
    p.add_argument("ref", metavar="NAME[:VERSION]")
    p.add_argument(
        "--force", action="store_true", help="also remove the aliases that point at what is deleted (refused otherwise)"
    )
    _store_flag(p)
    p.set_defaults(run=_delete)

    p = sub.add_parser("import", help="publish a network from a BIF or XMLBIF file as a new version")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--format", choices=IMPORT_FORMATS, help="default: from the extension (.bif, .xml, .xmlbif)")
    p.add_argument(
        "--class",
        dest="class_name",
        metavar="NAME",
        help="the class variable (default: the one a bnserve export marked)",
    )
    p.add_argument(
        CPT_CELLS_FLAG,
        type=_limit(int, "probabilities"),
        default=DEFAULT_MAX_CPT_CELLS,
        metavar="N",
        help=f"refuse a file with a CPT of more probabilities (default {DEFAULT_MAX_CPT_CELLS:,}; none: no limit)",
    )
    p.add_argument("--name", required=True, help="model name in the store")
    _store_flag(p)
    _alias_flag(p)
    _annotation_flags(p)
    p.set_defaults(run=_import)

    p = sub.add_parser("db", help="the store's database schema")
    db = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    q = db.add_parser(
        "upgrade",
        help="create the store's tables, or migrate them to this bnserve's schema; run once "
        "before servers and trainers of a new version use the store",
    )
    _store_flag(q)
    q.set_defaults(run=_db)

    p = sub.add_parser("export", help="write one model version as BIF, XMLBIF or Graphviz DOT")
    p.add_argument("ref", metavar="NAME[:VERSION|@ALIAS]")
    p.add_argument("--format", choices=EXPORT_FORMATS, help="default: from the --out extension")
    p.add_argument("--out", metavar="FILE", help="write here instead of stdout")
    p.add_argument("--network", type=_non_negative, metavar="I", help="only member I of an ensemble (from 0)")
    _store_flag(p)
    p.set_defaults(run=_export)
    return parser


def _reading_flags(p: argparse.ArgumentParser, as_trained: bool = False) -> None:
    """--format, --na-values, --delimiter and --keep-whitespace: how a data file's texts are
    read. ``as_trained`` (predict): by default as the model's training data was read."""
    p.add_argument("--format", dest="fmt", choices=FORMATS, help="file format (default: from the extension)")
    default = "the model's, else " if as_trained else ""
    p.add_argument(
        "--na-values",
        type=_texts,
        default=None if as_trained else DEFAULT_NA_VALUES,
        metavar="TEXT[,TEXT…]",
        help=f"texts read as a missing value, beside the empty one (default {default}{','.join(DEFAULT_NA_VALUES)}; "
        "'' for none)",
    )
    p.add_argument(
        "--delimiter",
        type=_delimiter,
        metavar="CHAR",
        help="the field separator of a CSV or TSV file, when not a comma (CSV) or a tab (TSV): e.g. ';', '|', tab",
    )
    p.add_argument(
        "--keep-whitespace",
        action="store_true",
        help="keep the spaces around a value (by default ' Male' is read as 'Male'"
        + ("; default: as the model was trained)" if as_trained else ")"),
    )
    p.add_argument(
        COLUMNS_FLAG,
        type=_limit(int, "columns"),
        default=DEFAULT_MAX_COLUMNS,
        metavar="N",
        help=f"refuse a data file of more columns (default {DEFAULT_MAX_COLUMNS:,}; none: no limit)",
    )
    p.add_argument(
        DECOMPRESSED_FLAG,
        type=_limit(parse_size, "bytes (e.g. 8GiB)", none=NO_LIMIT),
        metavar="SIZE",
        help="refuse a .gz data file that decompresses to more, e.g. 8GiB; none: no limit (default: for a file "
        f"read whole, what fits --memory-budget, {DEFAULT_MEMORY_BUDGET // IN_MEMORY_PER_FILE_BYTE >> 20} MiB "
        "by default; none for one read in chunks)",
    )


def _quiet_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quiet",
        "-q",
        action="store_true",
        help="no progress bars or notes on stderr (bars show only when stderr is a terminal)",
    )


def _store_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--store",
        metavar="URL",
        help="SQLAlchemy URL of the model store (default: $BNSERVE_STORE_URL, else the file "
        "$BNSERVE_STORE_URL_FILE names, else sqlite:///bnserve.db)",
    )
    add_timeout_flags(p)


def _alias_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--alias",
        dest="aliases",
        action="append",
        default=[],
        metavar="ALIAS",
        help="point this alias (e.g. production) at the new version, in the same transaction; repeat for more",
    )


def _annotation_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--description", metavar="TEXT", help="a description of the new version (up to 1000 characters)")
    p.add_argument(
        "--tag",
        dest="tags",
        action="append",
        default=[],
        type=_tag,
        metavar="KEY=VALUE",
        help="tag the new version (KEY like a model name, VALUE up to 256 characters); repeat for more",
    )


def _tag(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        with reporting(None if getattr(args, "quiet", False) else terminal_bars()):
            return args.run(args)
    except UsageError as exc:
        print(f"{PROG}: usage error: {exc}", file=sys.stderr)
        return 2
    except BnServeError as exc:
        print(f"{PROG}: error: {exc.message}", file=sys.stderr)
        return 1
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
    except BrokenPipeError:  # `trainer show … | head`: the reader left; not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except MemoryError:  # past a limit set to none, or a machine too small for the data
        print(f"{PROG}: error: out of memory; nothing was published", file=sys.stderr)
        return 1


# ---------------------------------------------------------------- commands


def _algorithms(text: str) -> list[str]:
    names = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in names if a not in LEARNERS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown algorithm {', '.join(unknown) or repr(text)}; expected some of {', '.join(LEARNERS)}"
        )
    return list(dict.fromkeys(names))


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _algorithms_or_auto(text: str) -> list[str]:
    """As ``_algorithms``, with ``auto`` allowed among them (evaluate)."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    learners = [a for a in names if a != AUTO]
    if learners or not names:
        _algorithms(",".join(learners) or text)  # raises on an unknown name or an empty list
    return list(dict.fromkeys(names))


def _estimator(text: str) -> Estimator:
    try:
        return Estimator.parse(text)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _param_help(name: str) -> str:
    """ "users: help" per distinct declaration of the parameter ``name`` (most learners share one)."""
    by_help: dict[str, list[str]] = {}
    for algo, learner in LEARNERS.items():
        for p in learner.params:
            if p.name == name:
                by_help.setdefault(p.help, []).append(algo)
    return "; ".join(f"{', '.join(users)}: {text}" for text, users in by_help.items())


def _learner_params(
    args: argparse.Namespace, algos: Sequence[str] | None = None, taken_elsewhere: Sequence[str] = ()
) -> dict[str, Any]:
    """The learner parameters given on the command line; one that none of the algorithms
    takes (nor ``taken_elsewhere``, e.g. k by auto) is a usage error."""
    algos = algos or [args.algo]
    given = {name: getattr(args, name) for name in PARAMETERS if getattr(args, name) is not None}
    for name, value in given.items():
        param = PARAMETERS[name]
        if name in taken_elsewhere and not any(LEARNERS[a].takes(name) for a in algos):
            continue
        if not any(LEARNERS[a].takes(name) for a in algos):
            raise UsageError(f"{param.flag} does not apply to --algo {','.join(algos)}")
        try:
            param.value(value)
        except InvalidInput as exc:
            raise UsageError(f"{param.flag} {value}: {exc.message}") from None
    return given


def _describe(algo: str, params: dict[str, Any]) -> str:
    return ", ".join([algo, *(f"{key}={value}" for key, value in params.items() if value is not None)])


def _auto_choice(args: argparse.Namespace) -> tuple[list[str], list[int]]:
    """--candidates and --k (an integer or a range) for --algo auto; other learner flags are refused."""
    others = [PARAMETERS[n].flag for n in PARAMETERS if n != "k" and getattr(args, n) is not None]
    if others:
        raise UsageError(f"{', '.join(others)} does not apply to --algo auto")
    return list(args.candidates or DEFAULT_CANDIDATES), _auto_ks(args)


def _auto_ks(args: argparse.Namespace) -> list[int]:
    ks = DEFAULT_KS if args.k is None else args.k if isinstance(args.k, list) else [args.k]
    if not ks or min(ks) < 0:
        raise UsageError(f"--k: expected non-negative values, got {args.k}")
    return list(ks)


def _preprocessing(args: argparse.Namespace, whole: bool = True) -> Preprocessing:
    """--nominal, --numeric, --ignore, --discretize, --missing and how the file is read
    (``whole`` or in chunks) as one Preprocessing."""
    default, per_column = Method(), {}
    for spec in args.discretize:
        column, _, method = spec.rpartition("=")
        try:
            parsed = Method.parse(method)
        except InvalidInput as exc:
            raise UsageError(f"--discretize: {exc.message}") from None
        if column:
            per_column[column] = parsed
        else:
            default = parsed
    return Preprocessing(
        tuple(args.nominal),
        tuple(args.numeric),
        tuple(args.ignore),
        default,
        per_column,
        args.missing,
        tuple(args.na_values),
        not args.keep_whitespace,
        args.force_class,
        args.delimiter,
        _read_limits(args, whole),
    )


def _fit(args: argparse.Namespace) -> int:
    if args.algo == AUTO:
        candidates, ks = _auto_choice(args)
    elif args.candidates or args.time_budget != DEFAULT_BUDGET:
        raise UsageError("--candidates and --time-budget apply to --algo auto only")
    else:
        params = _learner_params(args)
    _check_publish_flags(args)
    _check_store_url(args.store)  # before the training, which may take minutes
    rows_needed = bool(args.estimator and args.estimator.needs_rows)
    streamable = args.algo != AUTO and LEARNERS[args.algo].streams(params) and not rows_needed
    several_files = is_pattern(args.data)  # its files are listed once, by load_streamed
    for flag, given in (("--dask", args.dask), ("--chunk-rows", args.chunk_rows), ("a set of files", several_files)):
        if not given:
            continue
        if rows_needed:
            raise UsageError(f"{flag} counts the rows; --estimator {args.estimator} fits on them: leave one out")
        if not streamable:
            raise UsageError(
                f"{flag} trains {', '.join(STREAMABLE)} (without {', '.join(ROW_FLAGS)}), "
                f"not --algo {args.algo}{' with those flags' if args.algo in STREAMABLE else ''}"
            )
    chunk_rows = args.chunk_rows or _chunk_rows_within_budget(args, streamable and args.missing != IMPUTE)
    if not chunk_rows and (args.dask or several_files):
        chunk_rows = DEFAULT_CHUNK_ROWS
    if chunk_rows:
        streamed = load_streamed(
            args.data, args.class_column, _preprocessing(args, whole=False), args.fmt, chunk_rows, args.jobs, args.dask
        )
        _summarize(args, streamed)
        model = fit(args.algo, streamed, args.estimator, **params)
    else:
        data = data_io.load(args.data, args.class_column, _preprocessing(args), args.fmt)
        _summarize(args, data)
        if args.algo == AUTO:
            estimators = [str(args.estimator)] if args.estimator else DEFAULT_ESTIMATORS
            model = fit_auto(_as_auto_reads(args, data), candidates, ks, estimators=estimators, budget=args.time_budget)
        else:
            model = fit(args.algo, data, args.estimator, **params)
    return _publish(args, with_table_precision(model, args.precision))


def _summarize(args: argparse.Namespace, data: data_io.TrainingView) -> None:
    """The typed columns on stderr (``summary``) when it is a terminal and not --quiet, as the
    progress bars; then the warnings, always: a scripted fit's log keeps them, and only them."""
    text, warnings = summary_text(data)
    shown = sys.stderr.isatty() and not getattr(args, "quiet", False)
    for line in text.splitlines() if shown else []:
        print(f"trainer: {line}" if not line.startswith(" ") else line, file=sys.stderr)
    for warning in warnings:
        print(f"trainer: warning: {warning}", file=sys.stderr)


def _chunk_rows_within_budget(args: argparse.Namespace, streams: bool) -> int | None:
    """Rows per chunk when the file is over --memory-budget and the fit ``streams``; else
    None (in memory; with a note on stderr when over the budget)."""
    delimited = delimiter_of(args.data, args.fmt) is not None
    chunk_rows = chunk_rows_within(args.data, args.memory_budget, args.jobs) if delimited else None
    if chunk_rows is None:
        return None
    if not streams:
        if args.quiet:
            return None
        print(
            f"trainer: note: {args.data} may need more memory than --memory-budget; it is read whole, since "
            f"only {', '.join(STREAMABLE)} (without {', '.join(ROW_FLAGS)}, --missing impute) train in chunks",
            file=sys.stderr,
        )
        return None
    return chunk_rows


def _limit(parse: Callable[[str], int | None], unit: str, none: Any = None) -> Callable[[str], Any]:
    """An argparse type for a limit: a positive number of ``unit`` as ``parse`` reads it, or
    ``none`` for the text none."""

    def limit(text: str) -> Any:
        if text.strip().lower() == "none":
            return none
        try:
            value = parse(text)
        except ValueError:
            value = None
        if value is None or value < 1:
            raise argparse.ArgumentTypeError(f"expected a positive number of {unit} or none, got {text!r}")
        return value

    return limit


def _read_limits(args: argparse.Namespace, whole: bool = True) -> ReadLimits:
    """--max-columns and --max-decompressed; the latter by default what a file read
    ``whole`` may take within --memory-budget (a .gz's size does not say how much it holds),
    and no limit for a file read in chunks, whose memory is one chunk's."""
    decompressed = args.max_decompressed
    if decompressed is None:
        budget = getattr(args, "memory_budget", DEFAULT_MEMORY_BUDGET)
        decompressed = budget // IN_MEMORY_PER_FILE_BYTE if whole and budget is not None else NO_LIMIT
    return ReadLimits(args.max_columns, None if decompressed is NO_LIMIT else decompressed)


def _size(text: str) -> int | None:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _as_auto_reads(args: argparse.Namespace, data: data_io.EncodedData) -> data_io.EncodedData:
    """The data as auto learns from it: with auto's discretisation unless --discretize was given."""
    return data if args.discretize else with_auto_discretization(data)


def _evaluate(args: argparse.Namespace) -> int:
    learners = [a for a in args.algo if a != AUTO]
    auto = AUTO in args.algo
    if args.candidates and not auto:
        raise UsageError("--candidates applies to --algo auto only")
    auto_estimators = [str(args.estimator)] if args.estimator else DEFAULT_ESTIMATORS
    if auto and not learners:
        auto_candidates, ks = _auto_choice(args)
    elif auto:
        auto_candidates, ks = list(args.candidates or DEFAULT_CANDIDATES), _auto_ks(args)
    given = _learner_params(args, learners, taken_elsewhere=["k"] if auto else []) if learners else {}
    estimator = {"estimator": args.estimator} if args.estimator else {}
    candidates = [(a, {**{n: v for n, v in given.items() if LEARNERS[a].takes(n)}, **estimator}) for a in learners]
    if args.test and len(args.data) > 1:
        raise UsageError("--test takes one --data file")

    def fit_chosen(train: data_io.EncodedData) -> Model:
        return fit_auto(train, auto_candidates, ks, estimators=auto_estimators)

    def in_given_order(singles: list[Evaluation], by_auto: Evaluation | None) -> list[Evaluation]:
        """The results in the order of --algo, auto where it was named."""
        results = list(singles)
        if by_auto is not None:
            results.insert(args.algo.index(AUTO), by_auto)
        return results

    evaluations, headings = [], {}
    preprocessing = _preprocessing(args)
    protocol: dict[str, Any] = {"seed": args.seed}
    for source in args.data:
        train = data_io.load(source, args.class_column, preprocessing, args.fmt)
        if args.test:
            test = data_io.load_with(args.test, train.variables, args.fmt, preprocessing)
            auto_train = _as_auto_reads(args, train) if auto else train
            auto_test = (
                test
                if auto_train is train
                else data_io.load_with(args.test, auto_train.variables, args.fmt, preprocessing)
            )
            results = in_given_order(
                [holdout(a, train, test, **p) for a, p in candidates],
                holdout(AUTO, auto_train, auto_test, fitter=fit_chosen) if auto else None,
            )
            headings[results[0].dataset] = (
                f"trained on {source} ({train.n_rows} rows), tested on {args.test} ({test.n_rows} rows)"
            )
            protocol.update(kind="holdout", test=args.test)
        else:
            cv = {"dataset": source, "folds": args.folds, "repeats": args.repeats, "seed": args.seed}
            results = in_given_order(
                cross_validate_many(candidates, train, **cv) if candidates else [],
                cross_validate_auto(
                    _as_auto_reads(args, train),
                    auto_candidates,
                    ks,
                    estimators=auto_estimators,
                    **cv,
                )[0]
                if auto
                else None,
            )
            repeats = f" × {args.repeats} repeats" if args.repeats > 1 else ""
            headings[source] = (
                f"{source} ({train.n_rows} rows): {args.folds}-fold stratified CV{repeats}, seed {args.seed}"
            )
            protocol.update(kind="cross-validation", folds=args.folds, repeats=args.repeats)
        evaluations.extend(results)
    from bnserve.trainer.evaluation.comparison import compare  # scipy.stats: 0.3 s, imported for evaluate only
    from bnserve.trainer.evaluation.report import render

    result = compare(evaluations, protocol)
    print(render(result, headings, spread=not args.test, per_class=args.per_class), end="")
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(result.to_dict(), out, indent=2, allow_nan=True)
            out.write("\n")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from bnserve.trainer.scoring import as_trained, output_format, score_file

    if output_format(args.out) is None:
        raise UsageError(f"--out {args.out}: give a .csv or .parquet file")
    name, version, alias = _parse_ref(args.ref)
    with _open_store(args) as store:
        mv = store.load(name, version=version, alias=alias)
    keep = list(dict.fromkeys(args.keep))
    reading = as_trained(mv.model, args.na_values, args.keep_whitespace, args.delimiter, _read_limits(args, False))
    scored = score_file(
        mv.model,
        args.data,
        args.out,
        keep=keep,
        fmt=args.fmt,
        preprocessing=reading,
        chunk_rows=args.chunk_rows,
        unknown=args.unknown,
    )
    where = f" into {args.out}" if args.out else ""
    print(
        f"{PROG}: scored {scored.rows:,} rows ({scored.with_missing:,} with missing values) "
        f"with {mv.name} version {mv.version}{where}",
        file=sys.stderr,
    )
    if scored.with_class is not None:
        accuracy = f"{scored.accuracy:.4f}" if scored.accuracy is not None else "undefined"
        print(
            f"{PROG}: accuracy {accuracy} ({scored.correct:,} of the {scored.with_class:,} rows with a class)",
            file=sys.stderr,
        )
    if scored.unseen.total:
        print(f"{PROG}: {scored.unseen.summary()}", file=sys.stderr)
    return 0


def _list(args: argparse.Namespace) -> int:
    """One row per version, from the catalogue's light columns (no CPT is read); the
    description is cut to fit the terminal's width (100 columns when not a terminal)."""
    if args.name is not None:
        _check_flag(check_model_name, args.name, "NAME")
    with _open_store(args) as store:
        versions = store.list_versions(args.name)
    if args.json:
        doc = [
            {
                "name": v.name,
                "version": v.version,
                "created": _utc(v.created_at_ms),
                "created_at_ms": v.created_at_ms,
                "algorithm": v.algorithm,
                "aliases": list(v.aliases),
                "description": v.description,
                "tags": dict(v.tags),
            }
            for v in versions
        ]
        print(json.dumps(doc, indent=2))
        return 0
    if not versions:
        print("no models")
        return 0
    rows = [("NAME", "VERSION", "CREATED", "ALGORITHM", "ALIASES")]
    rows += [(v.name, str(v.version), _utc(v.created_at_ms), v.algorithm, ",".join(v.aliases) or "-") for v in versions]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    room = max(shutil.get_terminal_size((100, 24)).columns - sum(widths) - 2 * len(widths), 20)
    descriptions = ["DESCRIPTION", *(_one_line(v.description, room) for v in versions)]
    for row, description in zip(rows, descriptions):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + description)
    return 0


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _one_line(text: str | None, room: int) -> str:
    """``text`` on one line of at most ``room`` characters ("-" for none)."""
    flat = " ".join((text or "").split()) or "-"
    return flat if len(flat) <= room else flat[: room - 1].rstrip() + "…"


def _show(args: argparse.Namespace) -> int:
    name, version, alias = _parse_ref(args.ref)
    with _open_store(args) as store:
        mv = store.load(name, version=version, alias=alias)
    model = mv.model
    if args.dot:
        print(write_model(model, "dot", mv.name), end="")
        return 0
    created = datetime.fromtimestamp(mv.created_at_ms / 1000, tz=UTC).isoformat(timespec="seconds")
    aliases = sorted(mv.aliases)
    if args.json:
        doc = {
            "name": mv.name,
            "version": mv.version,
            "created_at_ms": mv.created_at_ms,
            "checksum": mv.checksum,
            "aliases": aliases,
            "description": mv.description,
            "tags": dict(mv.tags),
            **structure_dict(model),
            "arcs": [[[p, c] for p, c in net.arcs] for net in model.networks],
        }
        print(json.dumps(doc, indent=2, sort_keys=True))
        return 0
    print(f"{mv.name} version {mv.version}  created {created}  checksum {mv.checksum}")
    print(f"aliases: {', '.join(aliases) if aliases else 'none'}")
    if mv.description is not None:
        print("description: " + mv.description.replace("\n", "\n  "))
    if mv.tags:
        print(f"tags: {', '.join(f'{k}={v}' for k, v in mv.tags.items())}")
    print(f"algorithm: {model.algorithm}  combination: {model.combination}")
    print(f"parameters: {json.dumps(dict(model.params), sort_keys=True)}")
    print("variables:")
    width = max(len(v.name) for v in model.variables)
    for v in model.variables:
        kind = ""
        if v.kind == "numeric":
            kind = f"numeric, cut at {', '.join(map(repr, v.cuts))}: " if v.cuts else "numeric, not cut: "
        print(f"  {v.name.ljust(width)}  {v.role.ljust(7)}  {kind}{', '.join(v.states)}")
    for i, net in enumerate(model.networks):
        print("arcs:" if len(model.networks) == 1 else f"arcs of network {i}:")
        for parent, child in net.arcs:
            print(f"  {parent} -> {child}")
    print("metadata:")
    for key, value in sorted(model.metadata.items()):
        print(f"  {key}: {json.dumps(value, sort_keys=True)}")
    return 0


def _alias(args: argparse.Namespace) -> int:
    _check_flag(check_model_name, args.name, "NAME")
    _check_flag(check_alias, args.alias, "ALIAS")
    with _open_store(args) as store:
        store.set_alias(args.name, args.alias, args.version)
    print(f"{args.name}: alias {args.alias} -> version {args.version}")
    return 0


def _unalias(args: argparse.Namespace) -> int:
    _check_flag(check_model_name, args.name, "NAME")
    _check_flag(check_alias, args.alias, "ALIAS")
    with _open_store(args) as store:
        version = store.remove_alias(args.name, args.alias)
    print(f"{args.name}: alias {args.alias} removed (it named version {version})")
    return 0


def _delete(args: argparse.Namespace) -> int:
    if "@" in args.ref:
        raise UsageError(f"delete takes NAME or NAME:VERSION, not an alias ({args.ref!r}); remove one with unalias")
    name, version, _ = _parse_ref(args.ref)
    with _open_store(args) as store:
        deleted = store.delete(name, version, force=args.force)
    numbers = ", ".join(map(str, deleted.versions))
    if version is None:
        line = f"deleted model {name} (version{'s' if len(deleted.versions) > 1 else ''} {numbers})"
    else:
        line = f"deleted {name} version {numbers}"
    if deleted.aliases:
        removed = ", ".join(f"{a} (version {v})" for a, v in deleted.aliases.items())
        line += f"; removed the alias{'es' if len(deleted.aliases) > 1 else ''} {removed}"
    print(line)
    return 0


def _import(args: argparse.Namespace) -> int:
    fmt = args.format or format_of(args.file)
    if fmt not in IMPORT_FORMATS:
        raise UsageError(f"cannot tell the format of {args.file!r} from its extension; give --format bif or xmlbif")
    _check_publish_flags(args)
    return _publish(args, read_model(args.file, fmt, args.class_name, args.max_cpt_cells))


def _check_publish_flags(args: argparse.Namespace) -> None:
    """--name, --alias, --description and --tag of fit and import, checked before any work."""
    _check_flag(check_model_name, args.name, "--name")
    for alias in args.aliases:
        _check_flag(check_alias, alias, "--alias")
    _check_flag(check_description, args.description, "--description")
    keys = [key for key, _ in args.tags]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise UsageError(f"--tag: the key {', '.join(map(repr, twice))} is given more than once")
    _check_flag(check_tags, dict(args.tags), "--tag")


def _publish(args: argparse.Namespace, model: Model) -> int:
    """Publish ``model`` as the next version of ``--name`` with ``--alias``es, and say so. The
    store is opened only now: bad input never reaches it (a new store is created)."""
    with _open_store(args, create=True) as store:
        version = store.publish(
            args.name, model, tuple(args.aliases), description=args.description, tags=dict(args.tags)
        )
    aliases = ", ".join(args.aliases) if args.aliases else "none"
    estimator = model.metadata.get("estimator", "laplace")
    described = _describe(
        model.algorithm, {**model.params, **({"estimator": estimator} if estimator != "laplace" else {})}
    )
    print(f"published {args.name} version {version} ({described}); aliases: {aliases}")
    return 0


def _export(args: argparse.Namespace) -> int:
    fmt = args.format or (format_of(args.out) if args.out else None)
    if fmt not in EXPORT_FORMATS:
        where = f"the extension of {args.out!r}" if args.out else "stdout"
        raise UsageError(f"give --format bif, xmlbif or dot (it cannot be told from {where})")
    name, version, alias = _parse_ref(args.ref)
    with _open_store(args) as store:
        mv = store.load(name, version=version, alias=alias)
    text = write_model(mv.model, fmt, mv.name, args.network)  # all of it before anything is written
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(args.out, "w", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        raise InvalidInput(f"cannot write {args.out}: {exc.strerror or exc}") from None
    print(f"wrote {name} version {mv.version} as {fmt} to {args.out}")
    return 0


def _parse_ref(ref: str) -> tuple[str, int | None, str | None]:
    """NAME, NAME:VERSION or NAME@ALIAS; a bad one is a usage error."""
    try:
        return parse_ref(ref)
    except InvalidInput as exc:
        raise UsageError(f"NAME[:VERSION|@ALIAS] {ref!r}: {exc.message}") from None


def _check_flag(check: Callable[[Any], Any], value: Any, flag: str) -> None:
    """Run a store name rule on a command-line value; a failure is a usage error."""
    try:
        check(value)
    except InvalidInput as exc:
        raise UsageError(f"{flag}: {exc.message}") from None


def _check_store_url(cli_value: str | None) -> None:
    """Refuse a store URL that cannot be used (syntax, driver), without connecting."""
    from bnserve.store.db import resolve_store_url
    from bnserve.store.db.engine import create_store_engine

    create_store_engine(resolve_store_url(cli_value)).dispose()


def _open_store(args: argparse.Namespace, create: bool = False):
    """The SQL store of --store, imported here so that ``evaluate`` needs no database driver.
    ``create``: a command that writes sets up a new, empty store (an existing one must be at
    this code's schema)."""
    from bnserve.store.db import ModelStore, resolve_store_url

    return ModelStore(resolve_store_url(args.store), create=create, timeouts=timeouts_of(args))


def _db(args: argparse.Namespace) -> int:
    """``trainer db upgrade``: the one command that migrates a store's schema."""
    from bnserve.store.db import redacted, resolve_store_url, upgrade_store

    url = resolve_store_url(args.store)
    before, after = upgrade_store(url, timeouts_of(args))
    if before == after:
        print(f"the store at {redacted(url)} is at schema revision {after}, this bnserve's; nothing to do")
    else:
        print(f"upgraded the store at {redacted(url)} from schema revision {before or 'none'} to {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
