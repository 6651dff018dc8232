"""``trainer fit``: build a training spec from the flags, train, publish."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from bnserve.argtypes import converted, limit, whole_number
from bnserve.store.errors import BnServeError
from bnserve.store.model.names import shown
from bnserve.store.predictor.precision import FLOAT32_ERROR_BOUND, PRECISIONS
from bnserve.trainer.cli.flags import (
    _algorithms,
    _alias_flag,
    _annotation_flags,
    _signing_flag,
    _store_flag,
)
from bnserve.trainer.cli.learning import learning_flags, training_spec, usage
from bnserve.trainer.cli.publishing import _check_publish_flags, _publish, check_store_meanwhile
from bnserve.trainer.cores import available, limited
from bnserve.trainer.data.budget import DEFAULT_MEMORY_BUDGET, parse_size
from bnserve.trainer.learners.registry import DEFAULT_CANDIDATES, DEFAULT_WORK_BUDGET, STREAMABLE
from bnserve.trainer.progress import note

if TYPE_CHECKING:
    from bnserve.trainer.data import TrainingView

DASK_ENV = "BNSERVE_DASK_SCHEDULER"


def add_fit(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="learn a model and publish it as a new version")
    learning_flags(p, several=False)
    p.add_argument("--name", required=True, help="model name in the store")
    _store_flag(p)
    _alias_flag(p)
    _annotation_flags(p)
    _signing_flag(p)
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="float64",
        help="dtype of the served log tables: float64 (default), float32 (half the memory), or auto "
        f"(float32 where the posteriors move by at most {FLOAT32_ERROR_BOUND:g}); recorded in the metadata",
    )
    p.add_argument(
        "--chunk-rows",
        type=whole_number(1),
        metavar="N",
        help=f"train without holding the file: read it N rows at a time ({', '.join(STREAMABLE)}; CSV, TSV or Parquet)",
    )
    p.add_argument(
        "--dask",
        metavar="ADDRESS",
        default=os.environ.get(DASK_ENV) or None,
        help="count the data on the workers of this Dask scheduler (e.g. tcp://scheduler:8786; default "
        f"${DASK_ENV}): the parts of --data, read by the workers, which must reach it too; "
        f"{', '.join(STREAMABLE)} only (pip install 'bnserve[dask]'); each call to it is given "
        "$BNSERVE_DASK_TIMEOUT seconds (default 30); tls:// takes Dask's TLS configuration (docs/scaling.md)",
    )
    p.add_argument(
        "--jobs",
        type=whole_number(1),
        default=available(),
        metavar="N",
        help="the cores the fit may use: the threads that parse a local CSV or TSV; the processes that read "
        "and count the parts of data trained in chunks (the files of a glob; a local CSV or TSV of at least "
        "8 MiB a part, with no quote character; not with --dask), each on one core; and those that score "
        "--algo auto's candidates at once (the same model as one process); default: the cores this process "
        "may run on",
    )
    p.add_argument(
        "--memory-budget",
        type=converted(parse_size),
        default=DEFAULT_MEMORY_BUDGET,
        metavar="SIZE",
        help="a CSV or TSV file estimated to need more memory than this is streamed in chunks, by the "
        f"learners that can ({', '.join(STREAMABLE)}), and the tables a fit holds at once are refused past it: "
        "e.g. 512MiB, 4GiB; none: always in memory, and no bound on the tables (default 1GiB)",
    )
    p.add_argument(
        "--candidates",
        type=_algorithms,
        metavar="ALGO[,ALGO…]",
        help=f"auto: the learners to choose from (default {','.join(DEFAULT_CANDIDATES)}; nb always)",
    )
    p.add_argument(
        "--work-budget",
        type=limit(int, "cell-fits"),
        default=DEFAULT_WORK_BUDGET,
        metavar="CELL_FITS",
        help="auto: the work its search may do, in cell-fits (rows x features x folds x a candidate's cost "
        f"relative to naive Bayes; default {DEFAULT_WORK_BUDGET:,}, about 90 s on one core); a candidate that "
        "would pass it is not started; none: every candidate. Work, not time: the same model on any machine",
    )
    p.add_argument("--time-budget", action=_Replaced, nargs="?", help=argparse.SUPPRESS)
    p.add_argument(
        "--seed",
        type=whole_number(0),
        default=0,
        help="auto: the seed of the folds its candidates are scored on (default 0)",
    )
    p.set_defaults(run=_fit)


class _Replaced(argparse.Action):
    """--time-budget: auto's budget is work now (--work-budget), so that a file gives the same model on any machine."""

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        parser.error(
            "--time-budget is gone: auto's budget is work, not seconds, so the choice is the same on any "
            f"machine; use --work-budget CELL_FITS (default {DEFAULT_WORK_BUDGET:,}) or --work-budget none"
        )


def _fit(args: argparse.Namespace) -> int:
    from bnserve.trainer.data.parallel import settle, start_pool

    if args.chunk_rows and args.jobs > 1 and not args.dask:  # forked now, before any thread starts
        start_pool(args.jobs, fork=True)
    try:
        with limited(args.jobs):  # --jobs 1: one core, the parse's threads too
            return _fit_and_publish(args)
    finally:
        settle()  # a fit refused before its first pass: the processes started, then told to end


def _fit_and_publish(args: argparse.Namespace) -> int:
    from bnserve.trainer.data.parallel import connect
    from bnserve.trainer.plan import data_path, learn, read

    spec = training_spec(args, args.algo)
    _check_publish_flags(args)
    unreachable = None
    if spec.dask:  # first: the workers wait for it, not for the store check's SQLAlchemy import
        try:
            connect(spec.dask)
        except BnServeError as exc:  # reported after the store check, as any error of the reading
            unreachable = exc
    checked = check_store_meanwhile(args.store)
    try:
        if unreachable is not None:
            raise unreachable
        path = usage(data_path, spec, args.data)
        if path.note:
            note(path.note)
        data = read(spec, args.data, path)
    finally:
        checked()  # a store URL that cannot be used is refused first, and before the training
    _summarize(args, data)  # the data as the training reads them (auto: cut as auto cuts them)
    return _publish(args, learn(spec, data))


def _summarize(args: argparse.Namespace, data: TrainingView) -> None:
    """The typed columns on stderr (``summary``) when it is a terminal and not --quiet, as the
    progress bars; then the warnings, always: a scripted fit's log keeps them, and only them."""
    from bnserve.trainer.data.summary import summary_text

    text, warnings = summary_text(data)
    on_terminal = sys.stderr.isatty() and not getattr(args, "quiet", False)
    for line in text.splitlines() if on_terminal else []:  # column names and values from the file: shown
        print(shown(f"trainer: {line}" if not line.startswith(" ") else line), file=sys.stderr)
    for warning in warnings:
        print(f"trainer: warning: {shown(warning)}", file=sys.stderr)
