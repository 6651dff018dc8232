"""The learning flags of ``fit`` and ``evaluate``, and the training spec they make."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from bnserve.argtypes import limit
from bnserve.store.errors import InvalidInput
from bnserve.trainer.cli.flags import (
    NO_LIMIT,
    UsageError,
    _algorithms_or_auto,
    _estimator,
    _quiet_flag,
    _reading_flags,
)
from bnserve.trainer.data import AVAILABLE_CASE, MISSING_POLICIES
from bnserve.trainer.data.projections import PROJECTIONS
from bnserve.trainer.learners.registry import AUTO, FLAGS, LEARNERS, PARAMETERS
from bnserve.trainer.learners.sizing import CPT_CELLS_FLAG, DEFAULT_MAX_CPT_CELLS

if TYPE_CHECKING:
    from bnserve.trainer.plan import TrainingSpec


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
    for param in FLAGS.values():
        p.add_argument(param.flag, dest=param.name, type=param.type, help=param.help)
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
    p.add_argument("--ignore", action="extend", nargs="+", default=[], metavar="COLUMN", help="leave these columns out")
    p.add_argument(
        "--weight",
        metavar="COLUMN",
        help="the column of row weights: a row of weight w counts as w rows in all that is learned (not a "
        "feature; each a finite number >= 0); the learners that score on rows refuse it",
    )
    p.add_argument(
        "--discretize",
        action="append",
        default=[],
        metavar="[COLUMN=]METHOD",
        help="mdl (default), mdl:N (a column MDL leaves whole gets N equal-frequency intervals; "
        "--algo auto's default is mdl:16), pkid (about sqrt(n) intervals of sqrt(n) rows), wpkid (at "
        "least 30 rows an interval), equal-frequency:N or equal-width:N; for every numeric "
        "column, or COLUMN=METHOD for one",
    )
    p.add_argument(
        "--projections",
        choices=PROJECTIONS,
        help="derived features: lda adds the numeric columns' linear discriminants (ld1, ld2, …) as numeric "
        "features, learned on the training rows and computed from those columns wherever the model "
        "scores; none adds none (the default of a learner; --algo auto chooses by its inner CV)",
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
        CPT_CELLS_FLAG,
        type=limit(int, "cells"),
        default=DEFAULT_MAX_CPT_CELLS,
        metavar="N",
        help=f"refuse a fit with a CPT of more cells (default {DEFAULT_MAX_CPT_CELLS:,}; none: no limit); "
        "auto skips such a candidate",
    )
    p.add_argument(
        "--force-class",
        action="store_true",
        help="train on a class column that is numeric, or has more than 256 values (refused by default)",
    )


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


FIT_ONLY = ("precision", "memory_budget", "chunk_rows", "jobs", "dask")  # fit's spec flags beside the learning ones
P = ParamSpec("P")
T = TypeVar("T")


def training_spec(args: argparse.Namespace, algo: str, params: dict[str, Any] | None = None) -> TrainingSpec:
    """The spec the flags describe for ``algo`` (``params``: its learner flags, by default every
    one given); a spec that does not hold is a usage error naming the flag."""
    from bnserve.trainer.plan import BY_BUDGET, TrainingSpec

    given = {name: getattr(args, name) for name in PARAMETERS if getattr(args, name) is not None}
    params = dict(given if params is None else params)
    ks = None
    if algo == AUTO and args.k is not None:
        k = params.pop("k", args.k)
        ks = tuple(k) if isinstance(k, list) else (k,)
    discretize, per_column = None, {}
    for text in args.discretize:
        column, _, method = text.rpartition("=")
        if column:
            per_column[column] = method
        else:
            discretize = method
    decompressed = args.max_decompressed
    # auto's flags: fit's spec refuses them for a learner; evaluate gives them to auto among its learners
    fit = args.command == "fit"
    search = {n: getattr(args, n) for n in ("candidates", "work_budget") if (algo == AUTO or fit) and hasattr(args, n)}
    search["seed"] = args.seed if algo == AUTO and fit else 0  # evaluate's --seed shuffles its own folds
    fit_only = {name: getattr(args, name) for name in FIT_ONLY if hasattr(args, name)}
    try:
        return TrainingSpec(
            algo,
            params,
            str(args.estimator) if args.estimator else None,
            class_column=args.class_column,
            fmt=args.fmt,
            delimiter=args.delimiter,
            na_values=tuple(args.na_values),
            trim=not args.keep_whitespace,
            nominal=tuple(args.nominal),
            numeric=tuple(args.numeric),
            ignore=tuple(args.ignore),
            weight=args.weight,
            force_class=args.force_class,
            discretize=discretize,
            per_column=per_column,
            missing=args.missing,
            projections=args.projections,
            ks=ks,
            max_columns=args.max_columns,
            max_cpt_cells=args.max_cpt_cells,
            max_decompressed=BY_BUDGET if decompressed is None else None if decompressed is NO_LIMIT else decompressed,
            **search,
            **fit_only,
        )
    except InvalidInput as exc:
        raise UsageError(exc.message) from None


def usage(check: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``check(*args)``, its ``InvalidInput`` a usage error (a plan the flags cannot make)."""
    try:
        return check(*args, **kwargs)
    except InvalidInput as exc:
        raise UsageError(exc.message) from None
