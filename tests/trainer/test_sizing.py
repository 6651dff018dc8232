"""Every fit sizes its tables before it builds them (``learners.sizing``), and refuses past
the training limits before numpy allocates (issue 26).

For every learner, the sizes predicted from the learned structure are the CPTs the fit
then builds, cell for cell (a sizing that drifted from a learner fails here); with the cell
limit one below its largest CPT a fit is refused, or its search stays within the limit. The
pair statistics are sized as ``PairStatistics`` counts them. The refusals name the columns,
their states and the flag."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest

from bnserve.store.errors import InvalidInput
from bnserve.trainer.auto import CUT, cross_validate_auto, search
from bnserve.trainer.data import load
from bnserve.trainer.data.preprocessing import Preprocessing
from bnserve.trainer.evaluation.cross_validation import cross_validate_many, describe, holdout
from bnserve.trainer.fit import column_major, estimate_tables, fit
from bnserve.trainer.learners.parameters import Estimator
from bnserve.trainer.learners.registry import LEARNERS
from bnserve.trainer.learners.sizing import (
    CPT_CELLS_FLAG,
    DEFAULT_LIMITS,
    MEMORY_BUDGET_FLAG,
    TooLarge,
    TrainingLimits,
    pair_tables,
)
from bnserve.trainer.progress import noting
from tests.data_helpers import dataset
from tests.incident_file import write_incident_file

# learners whose search leaves out a candidate family past the cell limit (``sizing.allows``)
SEARCHES_WITHIN_LIMIT = ("k2", "k2-as", "k2-as-le", "cb", "info-as", "bsej", "asb", "hc", "skdb", "eskdb")


@pytest.fixture(scope="module")
def car():
    return dataset("car")


@pytest.fixture(scope="module")
def incident(tmp_path_factory):
    path = write_incident_file(tmp_path_factory.mktemp("incident") / "incident.csv")
    return load(path, preprocessing=Preprocessing(na_values=()))


def built_cells(model) -> list[int]:
    return sorted(node.cpt.size for net in model.networks for node in net.nodes)


@pytest.mark.parametrize("algo", sorted(LEARNERS))
def test_the_predicted_cpts_are_the_cpts_built(car, algo):
    learned, _ = LEARNERS[algo].run(column_major(car), {})
    predicted = [t.cells for t in estimate_tables(learned.members, Estimator(), car.n_rows)]
    model = fit(algo, car)
    assert sorted(predicted) == built_cells(model)
    largest = max(predicted)
    assert built_cells(fit(algo, car, limits=TrainingLimits(max_cpt_cells=largest))) == built_cells(model)
    try:  # one cell less: refused, or a search that kept every candidate family within it
        smaller = fit(algo, car, limits=TrainingLimits(max_cpt_cells=largest - 1))
    except TooLarge as refusal:
        assert f"past {CPT_CELLS_FLAG} {largest - 1:,}" in refusal.message
    else:
        assert algo in SEARCHES_WITHIN_LIMIT and max(built_cells(smaller)) < largest


@pytest.mark.parametrize("estimator", ["hdp", "alr", "dirichlet:0.5", "m:2"])
def test_every_estimator_builds_the_cpts_predicted(car, estimator):
    learned, _ = LEARNERS["tan"].run(column_major(car), {})
    predicted = estimate_tables(learned.members, Estimator.parse(estimator), car.n_rows)
    cpts = [t.cells for t in predicted if t.what.startswith("the CPT")]
    assert sorted(cpts) == built_cells(fit("tan", car, estimator))
    assert any(t.what == "the alr design matrix" for t in predicted) == (estimator == "alr")


def test_the_pair_statistics_are_sized_as_counted(incident):
    counted = sorted(table.size for table in incident.statistics.pairs.values())
    assert sorted(t.cells for t in pair_tables(incident)) == counted


def test_kdb_k3_on_the_incident_file_is_refused_naming_columns_states_and_flag(incident):
    with pytest.raises(TooLarge) as refusal:
        fit("kdb", incident, k=3)
    message = refusal.value.message
    assert message.startswith("kdb: the CPT of ") and "\n" not in message
    assert all(f"'{name}' {states} states" in message for name, states in (("Income", 352), ("Debt", 183)))
    assert f"past {CPT_CELLS_FLAG} 4,194,304" in message and "--na-values" in message and "--numeric" in message


def test_the_memory_budget_bounds_all_the_tables_together(car):
    learned, _ = LEARNERS["kdb"].run(column_major(car), {"k": 2})
    total = sum(t.bytes for t in estimate_tables(learned.members, Estimator(), car.n_rows))
    assert fit("kdb", car, k=2, limits=TrainingLimits(memory_budget=total)).algorithm == "kdb"
    with pytest.raises(TooLarge, match=re.escape(f"past {MEMORY_BUDGET_FLAG}")) as refusal:
        fit("kdb", car, k=2, limits=TrainingLimits(memory_budget=total - 1))
    assert "the largest, the CPT of " in refusal.value.message
    pairs = sum(t.bytes for t in pair_tables(car))  # the pair statistics are sized before the search
    with pytest.raises(TooLarge, match="the pair statistics of "):
        fit("kdb", car, k=2, limits=TrainingLimits(memory_budget=pairs - 1))
    assert fit("nb", car, limits=TrainingLimits(memory_budget=pairs - 1)).algorithm == "nb"  # nb reads no pairs


def test_the_limits_are_checked_where_they_are_made():
    assert DEFAULT_LIMITS == TrainingLimits(4_194_304, 1 << 30)
    assert TrainingLimits(None, None).allows(10**18)
    for bad in (0, -1, 2.5, True, "1"):
        with pytest.raises(InvalidInput, match="max_cpt_cells must be a positive integer or None"):
            TrainingLimits(max_cpt_cells=bad)
        with pytest.raises(InvalidInput, match="memory_budget must be a positive integer or None"):
            TrainingLimits(memory_budget=bad)


def test_auto_skips_what_does_not_fit_with_a_note_each_and_goes_on(incident):
    notes: list[str] = []
    with noting(notes.append):
        found = search(incident, ("nb", "kdb", "tan"), (1, 3), estimators=("laplace",), budget=None)
    # dropped: behind nb; the candidates on stage 0's other cuts are not the structures this is about
    scored = {describe(*candidate) for candidate in found.tried if CUT not in candidate[1]} | set(found.dropped)
    assert scored == {"nb estimator=laplace", "kdb k=1 estimator=laplace", "tan estimator=laplace"}  # not k=3
    assert len(notes) == len(found.refused) == 1 and notes[0] == f"auto: skipped {found.refused[0]}"
    assert notes[0].startswith("auto: skipped kdb k=3") and f"past {CPT_CELLS_FLAG}" in notes[0]


def test_without_a_sink_the_note_is_a_logged_warning(incident, caplog):
    with caplog.at_level(logging.WARNING, logger="bnserve.trainer"):
        search(incident, ("kdb",), (3,), estimators=("laplace",), budget=None)
    assert [r.getMessage()[:21] for r in caplog.records] == ["auto: skipped kdb k=3"]


def test_auto_fails_clearly_when_every_candidate_is_refused(incident):
    with noting(lambda _: None), pytest.raises(InvalidInput) as refusal:
        search(incident, ("kdb",), (3,), estimators=("laplace",), limits=TrainingLimits(max_cpt_cells=10))
    assert refusal.value.message.startswith("auto: every candidate is past the training limits; the first, nb ")


def test_searches_count_no_family_past_the_cell_limit(incident):
    """k2, hc and skdb choose parents within the limit instead of building what it refuses."""
    limit = 2 * 352 * 10
    for algo in ("k2", "hc", "skdb"):
        model = fit(algo, incident, limits=TrainingLimits(max_cpt_cells=limit))
        assert max(built_cells(model)) <= limit, algo
    assert np.all(np.array(built_cells(fit("nb", incident))) <= 2 * 352)


def test_the_arcs_alr_adds_are_sized_within_the_limits(car):
    """alr makes a kdb k=2 network perfect by adding arcs; the larger CPTs are sized first."""
    learned, _ = LEARNERS["kdb"].run(column_major(car), {"k": 2})
    tables = estimate_tables(learned.members, Estimator.parse("alr"), car.n_rows)
    given = max(t.cells for t in tables if t.what.startswith("the CPT"))
    model = fit("kdb", car, "alr", k=2)
    assert max(built_cells(model)) > given  # the added arcs make a larger table
    with pytest.raises(TooLarge, match=re.escape("estimator alr: the CPT of ")):
        fit("kdb", car, "alr", k=2, limits=TrainingLimits(max_cpt_cells=given))


def test_evaluation_fits_within_the_limits_it_is_given(car):
    """``trainer evaluate``'s paths (CV, holdout, auto's nested CV) pass the limits to every fit."""
    tight = TrainingLimits(max_cpt_cells=15)  # under kdb's CPTs of 4 x 4 x 4 states on car
    with pytest.raises(TooLarge, match="past --max-cpt-cells 15"):
        cross_validate_many([("kdb", {"k": 1})], car, folds=2, limits=tight)
    train, test = car.subset(np.arange(0, car.n_rows, 2)), car.subset(np.arange(1, car.n_rows, 2))
    with pytest.raises(TooLarge, match="past --max-cpt-cells 15"):
        holdout("kdb", train, test, limits=tight, k=1)
    notes: list[str] = []
    with noting(notes.append):
        [evaluation] = cross_validate_auto(
            car, ("tan",), estimators=("laplace",), folds=2, inner_folds=2, limits=TrainingLimits(max_cpt_cells=16)
        )
    assert set(evaluation.fold_choices) == {"nb estimator=laplace"} and len(notes) == 2  # tan skipped on each fold


def test_a_refusal_in_a_worker_process_reaches_the_caller_as_itself(car):
    """--jobs and the benches fit in worker processes: a fit refused there is pickled back
    whole (what and why), not turned into a broken process pool."""
    from concurrent.futures import ProcessPoolExecutor

    limits = TrainingLimits(max_cpt_cells=2)
    with pytest.raises(TooLarge) as here:
        fit("kdb", car, k=2, limits=limits)
    with ProcessPoolExecutor(1) as pool, pytest.raises(TooLarge) as there:
        pool.submit(fit, "kdb", car, k=2, limits=limits).result()
    assert (there.value.message, there.value.what, there.value.detail) == (
        here.value.message,
        here.value.what,
        here.value.detail,
    )
