"""``trainer evaluate``: cross-validate or hold-out test learners; writes no model."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from bnserve.argtypes import whole_number
from bnserve.store.model.names import shown
from bnserve.trainer import data as data_io
from bnserve.trainer.cli.flags import (
    PROG,
    UsageError,
    _algorithms,
    _unknown_flag,
)
from bnserve.trainer.cli.learning import _learner_params, learning_flags, training_spec
from bnserve.trainer.io import redacted_url
from bnserve.trainer.learners.registry import AUTO, DEFAULT_CANDIDATES, LEARNERS

if TYPE_CHECKING:
    from bnserve.store.model import Model
    from bnserve.trainer.data import EncodedData
    from bnserve.trainer.evaluation.cross_validation import Evaluation
    from bnserve.trainer.plan import TrainingSpec


def add_evaluate(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="cross-validate or hold-out test learners on data sets; writes no model")
    learning_flags(p, several=True)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--folds", type=whole_number(1), default=10, help="stratified CV folds (default 10)")
    how.add_argument("--test", metavar="FILE", help="score on this file instead of cross-validating (one --data)")
    _unknown_flag(p)  # for --test's file: its values unseen in the --data file
    p.add_argument(
        "--repeats", type=whole_number(1), default=1, help="repeat the CV with seeds SEED, SEED+1, … (default 1)"
    )
    p.add_argument("--seed", type=whole_number(0), default=0, help="fold shuffling seed (default 0)")
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


def _evaluate(args: argparse.Namespace) -> int:
    from bnserve.trainer.data.unseen import UnseenValues
    from bnserve.trainer.evaluation.cross_validation import cross_validate_many, holdout
    from bnserve.trainer.plan import IN_MEMORY, learn, read, with_auto_discretization

    learners = [a for a in args.algo if a != AUTO]
    auto = AUTO in args.algo
    if args.candidates and not auto:
        raise UsageError("--candidates applies to --algo auto only")
    given = _learner_params(args, learners, taken_elsewhere=["k"] if auto else []) if learners else {}
    specs = [training_spec(args, a, {n: v for n, v in given.items() if LEARNERS[a].takes(n)}) for a in learners]
    auto_spec = training_spec(args, AUTO, {} if learners else None) if auto else None
    candidates = [(s.algo, {**s.params, **({"estimator": s.estimator} if s.estimator else {})}) for s in specs]
    if args.test and len(args.data) > 1:
        raise UsageError("--test takes one --data file")
    reading = specs[0] if specs else auto_spec
    assert reading is not None

    def as_auto_reads(train: data_io.EncodedData) -> data_io.EncodedData:
        """The file read once for every learner, as auto reads it."""
        assert auto_spec is not None
        return train if reading is auto_spec or auto_spec.discretize is not None else with_auto_discretization(train)

    def fit_chosen(train: data_io.EncodedData) -> Model:
        assert auto_spec is not None
        return learn(auto_spec, train)

    def in_given_order(singles: list[Evaluation], by_auto: Evaluation | None) -> list[Evaluation]:
        """The results in the order of --algo, auto where it was named."""
        results = list(singles)
        if by_auto is not None:
            results.insert(args.algo.index(AUTO), by_auto)
        return results

    evaluations, headings = [], {}
    preprocessing = reading.preprocessing()
    limits = reading.limits  # every learner's spec and auto's hold the same limits
    protocol: dict[str, Any] = {"seed": args.seed}
    unseen = UnseenValues()  # in --test's file, read as missing; counted once, on its first coding
    for source in args.data:
        train = read(reading, source, IN_MEMORY)
        named = redacted_url(source)  # the name in the report and its JSON
        assert isinstance(train, data_io.EncodedData)
        if args.test:
            test = data_io.load_with(
                args.test, train.variables, args.fmt, preprocessing, unknown=args.unknown, unseen=unseen
            )
            auto_train = as_auto_reads(train) if auto else train
            auto_test = (
                test
                if auto_train is train
                else data_io.load_with(args.test, auto_train.variables, args.fmt, preprocessing, unknown=args.unknown)
            )
            results = in_given_order(
                [holdout(a, train, test, limits=limits, **p) for a, p in candidates],
                holdout(AUTO, auto_train, auto_test, fitter=fit_chosen, recode=_test_file_as_cut(args, preprocessing))
                if auto
                else None,
            )
            headings[results[0].dataset] = (
                f"trained on {named} ({train.n_rows} rows), tested on {redacted_url(args.test)} ({test.n_rows} rows)"
            )
            protocol.update(kind="holdout", test=redacted_url(args.test))
        else:
            cv = {"dataset": named, "folds": args.folds, "repeats": args.repeats, "seed": args.seed}
            results = in_given_order(
                cross_validate_many(candidates, train, limits=limits, **cv) if candidates else [],
                _auto_cv(auto_spec, as_auto_reads(train), cv) if auto_spec else None,
            )
            repeats = f" × {args.repeats} repeats" if args.repeats > 1 else ""
            headings[named] = (
                f"{named} ({train.n_rows} rows): {args.folds}-fold stratified CV{repeats}, seed {args.seed}"
            )
            protocol.update(kind="cross-validation", folds=args.folds, repeats=args.repeats)
        evaluations.extend(results)
    from bnserve.trainer.evaluation.comparison import compare  # scipy.stats: 0.3 s, imported for evaluate only
    from bnserve.trainer.evaluation.report import render

    result = compare(evaluations, protocol)
    print(shown(render(result, headings, spread=not args.test, per_class=args.per_class), keep="\n"), end="")
    if args.json_out:
        with open(args.json_out, "w") as out:
            json.dump(result.to_dict(), out, indent=2, allow_nan=True)
            out.write("\n")
    if unseen.total:
        print(f"{PROG}: {shown(unseen.summary())}", file=sys.stderr)
    return 0


def _test_file_as_cut(args: argparse.Namespace, preprocessing: Any) -> Any:
    """The --test file coded against the variables of auto's model (cut as it chose); its
    unseen values were counted when it was first coded."""
    return lambda variables: data_io.load_with(args.test, variables, args.fmt, preprocessing, unknown=args.unknown)


def _auto_cv(spec: TrainingSpec, train: EncodedData, cv: dict[str, Any]) -> Evaluation:
    """Auto scored by nested CV: its choice made again on each training fold."""
    from bnserve.trainer.auto import cross_validate_auto
    from bnserve.trainer.plan import auto_search

    candidates, ks, search = auto_search(spec)
    return cross_validate_auto(train, candidates, ks, **search, **cv, limits=spec.limits)[0]
