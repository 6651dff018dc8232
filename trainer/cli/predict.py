"""``trainer predict``: batch scoring of a data file with a model version."""

from __future__ import annotations

import argparse
import sys

from bnserve.argtypes import whole_number
from bnserve.store.model.names import shown
from bnserve.trainer.cli.flags import (
    NO_LIMIT,
    PROG,
    UsageError,
    _open_store,
    _parse_ref,
    _quiet_flag,
    _reading_flags,
    _store_flag,
    _unknown_flag,
)
from bnserve.trainer.data.budget import DEFAULT_CHUNK_ROWS
from bnserve.trainer.io import ReadLimits


def add_predict(sub: argparse._SubParsersAction) -> None:
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
        help="write here, as CSV (.csv) or Parquet (.parquet), instead of CSV on stdout; refused when it is the "
        "input, a special file or read-only; a link is written through; an existing file keeps its mode",
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
        type=whole_number(1),
        default=DEFAULT_CHUNK_ROWS,
        metavar="N",
        help=f"read, score and write N rows at a time (default {DEFAULT_CHUNK_ROWS:,})",
    )
    _unknown_flag(p)
    _reading_flags(p, as_trained=True)
    _quiet_flag(p)
    _store_flag(p)
    p.set_defaults(run=_predict)


def _predict(args: argparse.Namespace) -> int:
    from bnserve.trainer.scoring import Output, as_trained, output_format, read_chunks, score_file

    if output_format(args.out) is None:
        raise UsageError(f"--out {args.out}: give a .csv or .parquet file")
    name, version, alias = _parse_ref(args.ref)
    limits = ReadLimits(args.max_columns, None if args.max_decompressed in (None, NO_LIMIT) else args.max_decompressed)
    if args.out is not None:
        Output.of(args.out, args.data)  # refused before anything is read
    # the file is parsed while the store is opened and the model read (SQLAlchemy's import most of it)
    with read_chunks(args.data, args.fmt, args.chunk_rows, args.delimiter, limits) as tables:
        with _open_store(args) as store:
            mv = store.load(name, version=version, alias=alias)
        reading = as_trained(mv.model, args.na_values, args.keep_whitespace, args.delimiter, limits)
        scored = score_file(
            mv.model,
            args.data,
            args.out,
            keep=list(dict.fromkeys(args.keep)),
            fmt=args.fmt,
            preprocessing=reading,
            chunk_rows=args.chunk_rows,
            unknown=args.unknown,
            tables=tables,
        )
    where = f" into {args.out}" if args.out else ""
    print(
        f"{PROG}: scored {scored.rows:,} rows ({scored.with_missing:,} with missing values) "
        f"with {shown(mv.name)} version {mv.version}{shown(where)}",
        file=sys.stderr,
    )
    if scored.with_class is not None:
        accuracy = f"{scored.accuracy:.4f}" if scored.accuracy is not None else "undefined"
        print(
            f"{PROG}: accuracy {accuracy} ({scored.correct:,} of the {scored.with_class:,} rows with a class)",
            file=sys.stderr,
        )
    if scored.unseen.total:
        print(f"{PROG}: {shown(scored.unseen.summary())}", file=sys.stderr)
    return 0
