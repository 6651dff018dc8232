"""``--algo auto``'s first stage: how its numeric columns become intervals, chosen by its inner CV.

No one discretisation wins everywhere (10-fold, naive Bayes: ecoli 81.3 % with ``mdl:16``,
83.6 % with ``equal-frequency:10``; wine 99.4 % against 97.2 %), so auto tries each method of
a small menu (``DEFAULT_DISCRETIZATIONS``, today's ``mdl:16`` first) on the folds the search
then uses, scored by cheap proxies (``PROXIES``: naive Bayes and AODE with the search's first
estimator). The first method stays unless another's proxies get more rows right out of fold
by over ``MARGIN_Z`` standard errors of the paired difference, as clear as a candidate
dropped behind (the proxies are not the structures auto ends with: on dermatology
``equal-frequency:10`` gains naive Bayes one row of 366 and costs TAN 8 points; on an ecoli
fold a lead of z 2.6 lost the final model 4 test rows of 67; on letter the leads are z 4 to
11 and every structure gains); of those that do, the most accurate, ties to the lower
log-loss, then to the method listed first (the other options' proxies stay candidates of
the search: ``Alternative``). Each fold's cut points are learned on its
training rows alone (``EncodedData.split``): the choice never cuts on all the rows, nor on a
row it scores. Its work is charged to auto's budget like any candidate's. Skipped when no
numeric column takes the data's method (none, or every one has a ``--discretize COL=…`` of
its own), unless the discriminants are left to choose.

The same stage chooses the numeric columns' linear discriminants (``--projections lda``,
``trainer.data.projections``) when the spec leaves them to auto: the first method with them
is scored beside the menu, and they are kept where its proxies lead the first method's by
``PROJECTION_Z`` (``bench/projections.py``: over 18 numeric sets, z >= 2 kept the gains,
crabs +17 points, iris, ecoli, wdbc, and lost on none by more than noise). auto tries them
on fewer than ``LARGE_ROWS`` rows only: there the structures it ends with learn what the
proxies cannot, and a lead of the proxies did not carry to them (poker-hand, one outer fold
of 22,509 rows: the proxies +0.7 points at z 3.2, the laode-alr chosen −5.1 points; letter:
+0.05 points for twice the search). ``--projections lda`` adds them at any size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from bnserve.store.model import NUMERIC
from bnserve.trainer.data import EncodedData
from bnserve.trainer.data.discretize import Method
from bnserve.trainer.data.encoded import prepare
from bnserve.trainer.data.projections import LDA, MIN_INPUTS, NONE, projectable
from bnserve.trainer.evaluation.cross_validation import Split, fold_splits
from bnserve.trainer.evaluation.metrics import log_losses
from bnserve.trainer.evaluation.parallel import Candidate, Scored, score_each
from bnserve.trainer.learners.sizing import DEFAULT_LIMITS, TrainingLimits
from bnserve.trainer.progress import stage

PROXIES: tuple[str, ...] = ("nb", "aode")  # cheap, and they read every column as it is cut
MARGIN_Z = 3.0  # how far ahead of the first method another must be, in standard errors (DROP_Z's)
PROJECTION_Z = 2.0  # how far ahead the first method with the discriminants must be (bench/projections.py)


@dataclass(frozen=True)
class MethodScore:
    """One method of the menu: its proxies' pooled out-of-fold accuracy and log-loss, and its
    paired lead over the first method in standard errors (McNemar's z; 0 for the first)."""

    method: str
    accuracy: float
    log_loss: float
    lead_z: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "accuracy": self.accuracy, "log_loss": self.log_loss, "lead_z": self.lead_z}


@dataclass(frozen=True)
class Binning:
    """The method chosen, whether the numeric columns' discriminants are added
    (``projections``: lda or none), and what every option tried scored, in the order tried."""

    chosen: str
    scores: tuple[MethodScore, ...]
    projections: str = NONE

    @property
    def label(self) -> str:
        """The option's name: ``mdl:16``, or ``mdl:16+lda``."""
        return _label(self.chosen, self.projections)

    def apply(self, data: EncodedData) -> EncodedData:
        """``data`` prepared again, its numeric columns cut by the chosen method (those with a
        method of their own keep it), with the discriminants if chosen."""
        return recut(data, Method.parse(self.chosen), learn=True, projections=self.projections)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": f"proxies {', '.join(PROXIES)}: out-of-fold accuracy, {MARGIN_Z:g} SE ahead of the first; "
            f"discriminants added {PROJECTION_Z:g} SE ahead; another option where a proxy on it is the choice",
            "chosen": self.chosen,
            "projections": self.projections,
            "candidates": [s.to_dict() for s in self.scores],
        }


@dataclass(frozen=True)
class Alternative:
    """An option of stage 0 not chosen for the search, and its proxies' out-of-fold scores on
    the search's rows: models in their own right, which auto weighs beside its candidates
    (a cut is chosen for what most structures need, and one proxy may need another)."""

    binning: Binning  # the option, as the winner's would be applied
    proxies: list[tuple[Candidate, Scored]]


def choosable(data: EncodedData) -> bool:
    """Whether some numeric column takes the data's method, so there is a choice to make."""
    if data.columns is None or data.preprocessing is None:
        return False
    taken = data.preprocessing.per_column
    return any(v.kind == NUMERIC and v.name not in taken for v in data.features)


def derivable(data: EncodedData) -> bool:
    """Whether auto may add the numeric columns' discriminants (the spec leaves it to auto,
    ``Preprocessing.projections`` None) and there are any: ``MIN_INPUTS`` numeric columns of
    more than two values (dermatology's one, age, cost stage 0 a third of its work for a copy
    of itself)."""
    columns = data.columns
    if columns is None or data.preprocessing is None or data.preprocessing.projections is not None:
        return False
    return len(projectable(columns.numbers)) >= MIN_INPUTS


def recut(data: EncodedData, method: Method, learn: bool = False, projections: str = NONE) -> EncodedData:
    """``data`` whose numeric columns take ``method`` (and ``projections``). With ``learn`` the cut
    points are learned on all its rows; without, only the preprocessing changes (the codes do
    not), for ``fold_splits``, which learns them again on each training fold."""
    assert data.columns is not None and data.preprocessing is not None
    preprocessing = replace(data.preprocessing, discretize=method, projections=projections)
    if learn:
        return prepare(data.columns, preprocessing, data.weights)
    return replace(data, preprocessing=preprocessing)


def work_of_choice(menu: Sequence[str], cost: Callable[[str], int], derive: bool = False) -> int:
    """What the choice is charged up front: every proxy on every method of the menu, and on
    the first with the discriminants when ``derive``."""
    return (len(menu) + derive) * sum(cost(proxy) for proxy in PROXIES)


def choose_binning(
    data: EncodedData,
    menu: Sequence[str],
    folds: int,
    seed: int,
    estimator: str = "laplace",
    limits: TrainingLimits = DEFAULT_LIMITS,
    jobs: int = 1,
    cost: Callable[[Candidate], float] | None = None,
    derive: bool = False,
) -> tuple[Binning, list[Split], list[Alternative]]:
    """The method of ``menu`` the proxies score best on ``folds`` stratified folds (``seed``),
    and those folds prepared with it, for the search to go on with; and every other option
    with its proxies' scores (``Alternative``). The proxies of every method share ``jobs``
    processes (``score_each``; ``cost``: a proxy's work, as ``score_all`` takes it).

    With ``derive``, the first method with the discriminants is scored beside the menu; they
    are added when its proxies are ``PROJECTION_Z`` ahead of the first method's, and the
    other methods of the menu are then scored with them too, the choice among them as without."""
    proxies = [(proxy, {"estimator": estimator}) for proxy in PROXIES]

    def scored(options: Sequence[tuple[str, str]]) -> list[tuple[np.ndarray, float, list[Split], list[Scored]]]:
        """Per (method, projections): the proxies' hits end to end, log-loss, the folds and
        each proxy's own scores."""
        out = []
        with stage("auto: discretisations", len(options), "method") as bar:
            tables = [recut(data, Method.parse(text), projections=p) for text, p in options]
            prepared = [fold_splits(table, folds, seed) for table in tables]
            results = score_each([(t, s, proxies) for t, s in zip(tables, prepared)], limits, jobs, cost)
            for (text, p), result, splits in zip(options, results, prepared):
                pooled = [r.posteriors if r.posteriors is not None else np.zeros((data.n_rows, 0)) for r in result]
                hits = np.concatenate([_hits(q, data.y) for q in pooled])
                loss = float(np.mean([log_losses(q, data.y).mean() if q.size else np.inf for q in pooled]))
                out.append((hits, loss, splits, result))
                bar.note(_label(text, p))
                bar.update()
        return out

    options = [(text, NONE) for text in menu] + ([(menu[0], LDA)] if derive else [])
    results = scored(options)
    first = results[0][0]
    projections = NONE
    if derive and lead_z(results[-1][0], first) >= PROJECTION_Z:
        projections = LDA
        more = [(text, LDA) for text in menu[1:]]
        if more:
            results += scored(more)
        options += more
    scores = [
        MethodScore(_label(text, p), float(h.mean()), loss, lead_z(h, first))
        for (text, p), (h, loss, _, _) in zip(options, results)
    ]
    within = [i for i, (_, p) in enumerate(options) if p == projections]
    reference = results[within[0]][0]
    ahead = [i for i in within if i == within[0] or lead_z(results[i][0], reference) > MARGIN_Z]
    best = min(ahead, key=lambda i: (-round(scores[i].accuracy, 12), round(scores[i].log_loss, 12), i))
    alternatives = [
        Alternative(Binning(text, tuple(scores), p), list(zip(proxies, results[i][3])))
        for i, (text, p) in enumerate(options)
        if i != best and p == projections
    ]
    return Binning(options[best][0], tuple(scores), projections), results[best][2], alternatives


def _label(method: str, projections: str) -> str:
    """An option's name in the metadata and the progress: ``mdl:16``, or ``mdl:16+lda``."""
    return method if projections == NONE else f"{method}+{projections}"


def _hits(posteriors: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether each row's posterior puts the true class first (none where a proxy was refused)."""
    if posteriors.size == 0:
        return np.zeros(y.shape[0], dtype=bool)
    return posteriors.argmax(axis=1) == y


def lead_z(hits: np.ndarray, reference: np.ndarray) -> float:
    """McNemar's z of ``hits`` over ``reference`` (bool per decision, paired): positive when ahead."""
    ahead = int(np.count_nonzero(hits & ~reference))
    behind = int(np.count_nonzero(reference & ~hits))
    return 0.0 if ahead == behind else (ahead - behind) / float(np.sqrt(ahead + behind))
