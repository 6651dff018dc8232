"""``BayesNetClassifier``: every learner of the trainer as a scikit-learn classifier.

The data go the way ``trainer fit`` takes a file: the same typing of columns (numbers are
numeric unless a few whole-number codes; text, categoricals and bools nominal), the same
discretisation and missing-value policy, the same learners and CPT estimators. The fitted
model (``model_``) is the one the store holds and the server serves, and predictions go
through the same compiled predictor, so a notebook, ``trainer`` and ``server`` agree to the
last bit. Needs scikit-learn (``pip install 'bnserve[sklearn]'``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from bnserve.store.errors import InvalidInput
from bnserve.store.model import DEFAULT_UNKNOWN, Model
from bnserve.store.predictor import CompiledModel, compile_model
from bnserve.trainer.data.encoded import derived_columns, encode_columns
from bnserve.trainer.io.frames import column_array, frame_table
from bnserve.trainer.io.table import read_text
from bnserve.trainer.learners.registry import LEARNERS, PARAMETERS
from bnserve.trainer.learners.sizing import DEFAULT_MAX_CPT_CELLS
from bnserve.trainer.plan import AUTO, DEFAULT_WORK_BUDGET, TrainingSpec, spec_of, train
from bnserve.trainer.scoring import as_trained

CLASS_LABELS = "class_labels"  # metadata: the fitted y's labels as JSON values, so load gives them back
# How fit and predict check X (scikit-learn's validate_data), read as trainer reads a file: any
# dtype (text columns too); NaN missing, and inf and -inf numbers (in the first or last
# interval), where scikit-learn's default refuses them ("Input X contains infinity"). y and
# sample_weight keep their own finiteness checks.
_X_CHECKS: dict[str, Any] = {"dtype": None, "ensure_all_finite": False}


class BayesNetClassifier(ClassifierMixin, BaseEstimator):
    """A Bayesian network classifier learned by ``algo``.

    ``algo``: a learner (nb, tan, kdb, fkdb, aode, skdb, eskdb, …, as ``trainer fit --algo``)
    or ``"auto"`` (chosen among ``candidates`` and ``k`` by cross-validation within
    ``work_budget`` cell-fits, the same choice on any machine). The learner parameters (``k``, ``alpha``, ``members``, …) are
    those of ``trainer fit``; one the chosen learner does not take is ignored, so a grid can
    search ``algo`` and ``k`` together. ``cpt_estimator``: how counts become CPTs (laplace,
    ``dirichlet:0.5``, ``m:1``, hdp, alr). ``discretize``: the method for numeric columns
    (``mdl``, ``mdl:16``, ``equal-frequency:5``, …; None: mdl, and auto's ``mdl:16``).
    ``projections``: ``lda`` adds the numeric columns' linear discriminants as derived
    features, ``none`` none (None: auto chooses, a learner adds none). ``missing``: available-case, impute or state.
    ``nominal``/``numeric``: columns forced to a kind (names, or indices for an array).
    ``handle_unknown``: a value at predict time that no training row had is treated as
    missing (summed out), or an ``error``. ``precision``: the served tables' dtype.
    ``max_cpt_cells``: a fit with a CPT of more cells is refused before it allocates (auto
    skips such a candidate); None: no limit (``trainer fit --max-cpt-cells``).
    """

    def __init__(
        self,
        algo: str = "fkdb",
        *,
        k: int | None = None,
        alpha: float | None = None,
        theta: float | None = None,
        members: int | None = None,
        sample_seed: int | None = None,
        max_parents: int | None = None,
        loss: str | None = None,
        fd_min_count: int | None = None,
        start: str | None = None,
        tabu: int | None = None,
        tabu_steps: int | None = None,
        metric: str | None = None,
        order: str | None = None,
        cpt_estimator: str | None = None,
        discretize: str | None = None,
        projections: str | None = None,
        missing: str = "available-case",
        nominal: Sequence[str | int] | None = None,
        numeric: Sequence[str | int] | None = None,
        handle_unknown: str = DEFAULT_UNKNOWN,
        precision: str = "float64",
        candidates: Sequence[str] | None = None,
        work_budget: int | None = DEFAULT_WORK_BUDGET,
        max_cpt_cells: int | None = DEFAULT_MAX_CPT_CELLS,
    ):
        self.algo = algo
        self.k = k
        self.alpha = alpha
        self.theta = theta
        self.members = members
        self.sample_seed = sample_seed
        self.max_parents = max_parents
        self.loss = loss
        self.fd_min_count = fd_min_count
        self.start = start
        self.tabu = tabu
        self.tabu_steps = tabu_steps
        self.metric = metric
        self.order = order
        self.cpt_estimator = cpt_estimator
        self.discretize = discretize
        self.projections = projections
        self.missing = missing
        self.nominal = nominal
        self.numeric = numeric
        self.handle_unknown = handle_unknown
        self.precision = precision
        self.candidates = candidates
        self.work_budget = work_budget
        self.max_cpt_cells = max_cpt_cells

    def __sklearn_tags__(self) -> Any:  # sklearn.utils.Tags, untyped
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # missing values are summed out
        tags.input_tags.string = True  # nominal columns may be text
        tags.input_tags.categorical = True
        return tags

    # ------------------------------------------------------------------ fit

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> BayesNetClassifier:
        """Learn from ``X`` (a DataFrame, or an array of rows: numbers, text, NaN/None missing)
        and the class labels ``y``. ``sample_weight``: a row of weight w counts as w rows (as
        ``trainer fit --weight``; the learners that score on rows refuse weights)."""
        target = str(getattr(y, "name", None) or "class")  # a pandas Series' name
        checked, y = validate_data(self, X, y, **_X_CHECKS)
        classes, y_codes = _classes(y)  # first: scikit-learn's check trips over mixed types in its own ways
        check_classification_targets(y)
        if classes.size < 2:
            raise ValueError(f"y has one class ({classes[0]!r}); a classifier needs at least two")
        texts = [str(label) for label in classes]
        if len(set(texts)) < len(texts):
            raise ValueError(f"y has distinct labels that read as the same text: {texts}")
        names = _column_names(X, checked.shape[1])
        class_name = _free_name(target, names)
        extra = {class_name: column_array(np.asarray(texts, dtype=object)[y_codes])}
        weight_name = None
        if sample_weight is not None:  # a column of the table, read as trainer fit --weight reads one
            weights = _check_sample_weight(sample_weight, checked, ensure_non_negative=True)
            weight_name = _free_name("sample_weight", [*names, class_name])
            extra[weight_name] = column_array(np.asarray([repr(w) for w in weights.tolist()], dtype=object))
        with _value_errors():
            table = frame_table(X if hasattr(X, "columns") else checked, names, "X", extra)
            spec = self._spec(names, class_name)
            _check_labels_read_as_given(texts, spec)
            model = train(replace(spec, weight=weight_name), table)
        self.classes_ = classes
        self._adopt(_with_class_labels(model, classes))
        return self

    def _spec(self, names: Sequence[str], class_name: str) -> TrainingSpec:
        """The training spec of these parameters (the one ``trainer fit`` builds from its flags)."""

        def named(columns: Sequence[str | int] | None) -> tuple[str, ...]:
            return tuple(names[c] if isinstance(c, int | np.integer) else str(c) for c in columns or ())

        auto = self.algo == AUTO
        learner = LEARNERS.get(self.algo)
        params = {p.name: getattr(self, p.name) for p in learner.params} if learner else {}
        return TrainingSpec(
            self.algo,
            params,
            self.cpt_estimator,
            class_column=class_name,
            nominal=named(self.nominal),
            numeric=named(self.numeric),
            force_class=True,  # y passed check_classification_targets: integer labels are classes here
            discretize=self.discretize,
            projections=self.projections,
            missing=self.missing,
            unknown=self.handle_unknown,
            precision=self.precision,
            candidates=tuple(self.candidates) if auto and self.candidates is not None else None,
            ks=(self.k,) if auto and self.k is not None else None,
            work_budget=self.work_budget if auto else DEFAULT_WORK_BUDGET,
            max_cpt_cells=self.max_cpt_cells,
        )

    def _adopt(self, model: Model) -> None:
        """Take ``model`` as the fitted state (from ``fit`` or from the store)."""
        self.model_ = model
        self.n_features_in_ = len(_input_names(model))
        self._compiled = compile_model(model)  # here, not in predict: predicting changes no state

    # ------------------------------------------------------------------ predict

    def predict_proba(self, X: Any) -> np.ndarray:
        """P(class | row) for each row, columns in the order of ``classes_``."""
        proba = self._compiled_model().predict_proba(self._codes(X))
        return proba[:, self._class_order()]

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row (ties: the first in ``classes_``)."""
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """log P(class | row), computed in log space (finite where a probability underflows)."""
        log = self._compiled_model().predict_log_proba(self._codes(X))
        return log[:, self._class_order()]

    def _compiled_model(self) -> CompiledModel:
        check_is_fitted(self, "model_")
        if getattr(self, "_compiled", None) is None:  # unpickled: compiled once, on first use
            self._compiled = compile_model(self.model_)
        return self._compiled

    def _class_order(self) -> np.ndarray:
        """Position of each of ``classes_`` among the model's class states."""
        states = self.model_.class_variable.states
        return np.array([states.index(str(label)) for label in self.classes_], dtype=np.intp)

    def _codes(self, X: Any) -> np.ndarray:
        """The rows of ``X`` coded against the model's features (by name for a DataFrame,
        by position otherwise), their texts read with the model's missing markers, as the
        server codes a request."""
        features = self._compiled_model().features
        checked = validate_data(self, X, reset=False, **_X_CHECKS)
        plain = _input_names(self.model_)
        names = _column_names(X, checked.shape[1]) if hasattr(X, "columns") else plain
        # read as the model's training data was: its missing markers and whitespace rule (a model
        # trained with --na-values '' keeps 'NA' as a label), as trainer predict and the server do
        reading = as_trained(self.model_, None, keep_whitespace=False, delimiter=None)
        with _value_errors():
            table = reading.cleaned(frame_table(X if hasattr(X, "columns") else checked, names, "X"))
            missing = [name for name in plain if name not in table.header]
            if missing:
                raise ValueError(f"X has no column {', '.join(map(repr, missing))}")
            columns = derived_columns(features, lambda name: table.columns[table.header.index(name)])
            return encode_columns(features, columns, table.n_rows, source="X", unknown=self.handle_unknown)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.pop("_compiled", None)  # a pickle holds the model; its tables are compiled again
        return state


def from_model(model: Model) -> BayesNetClassifier:
    """A fitted classifier around a model from the store (or a file), with the parameters of
    the training spec its metadata records (``get_params()`` as when it was fitted; a model
    published before specs were recorded gives its algorithm only): ``classes_`` are the
    labels it was fitted with when the metadata keeps them, else its class states."""
    spec = spec_of(model)
    if spec is not None:
        estimator = BayesNetClassifier(**params_of(spec))
    else:
        estimator = BayesNetClassifier(str(model.algorithm) if model.algorithm in LEARNERS else AUTO)
    labels = model.metadata.get(CLASS_LABELS)
    states = model.class_variable.states
    kept = labels is not None and sorted(map(str, labels)) == sorted(states)  # the labels of these states
    estimator.classes_ = np.asarray(labels) if kept else np.asarray(states, dtype=object)
    estimator._adopt(model)
    names = _input_names(model)
    if names != [f"x{j}" for j in range(len(names))]:  # fitted on a DataFrame (or from a file): by name
        estimator.feature_names_in_ = np.asarray(names, dtype=object)
    return estimator


def _input_names(model: Model) -> list[str]:
    """The features ``X`` holds: the model's, but those derived from others (``projections``)."""
    return [v.name for v in model.features if v.projection is None]


def params_of(spec: TrainingSpec) -> dict[str, Any]:
    """The estimator's parameters that build ``spec`` (those it has: reading rules of a file
    and the memory budget have no parameter here)."""
    auto = spec.algo == AUTO
    params: dict[str, Any] = {"algo": spec.algo, **{n: v for n, v in spec.params.items() if n in PARAMETERS}}
    if auto and spec.ks is not None and len(spec.ks) == 1:
        params["k"] = spec.ks[0]
    return {
        **params,
        "cpt_estimator": spec.estimator,
        "discretize": spec.discretize,
        "projections": spec.projections,
        "missing": spec.missing,
        "nominal": list(spec.nominal) or None,
        "numeric": list(spec.numeric) or None,
        "handle_unknown": spec.unknown,
        "precision": spec.precision,
        "candidates": spec.candidates,
        "work_budget": spec.work_budget,
        "max_cpt_cells": spec.max_cpt_cells,
    }


def _with_class_labels(model: Model, classes: np.ndarray) -> Model:
    """The model with y's labels in its metadata when they are plain JSON values (so a model
    fitted on integer labels predicts integers again after publish and load)."""
    values = classes.tolist()
    if not all(isinstance(v, bool | int | float | str) for v in values):
        return model
    return replace(model, metadata={**model.metadata, CLASS_LABELS: values})


@contextmanager
def _value_errors() -> Iterator[None]:
    """The trainer's refusal of bad data (``InvalidInput``: a column type it does not read, a
    column name it refuses, a value a model cannot code) raised as scikit-learn's ValueError,
    in fit and predict alike."""
    try:
        yield
    except InvalidInput as exc:
        raise ValueError(exc.message) from None


def _classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """y's distinct labels in sorted order (``classes_``) and each row's index among them;
    labels of types that do not sort together (text and numbers) are a ValueError naming them."""
    try:
        return np.unique(y, return_inverse=True)
    except TypeError:  # np.unique sorts: '<' not supported between instances of 'int' and 'str'
        types = sorted({type(label).__name__ for label in y.tolist()})
        raise ValueError(
            f"y mixes labels of types {', '.join(types)}, which cannot be sorted into classes_; "
            "give labels of one type (e.g. y.astype(str))"
        ) from None


def _check_labels_read_as_given(texts: Sequence[str], spec: TrainingSpec) -> None:
    """Refuse a label of y that the reading rules change (a missing marker, the empty text,
    spaces around it): the class column is read as a file's is, so its rows would be dropped
    or merged with another label's, and ``classes_`` would name a class the model lacks."""
    for text in texts:
        read = read_text(text, spec.na_values, spec.trim)
        if read != text or read == "":
            became = "a missing class (its rows would be dropped)" if read == "" else f"{read!r}"
            raise ValueError(
                f"y has the label {text!r}, which reads as {became}: y's labels are read as the "
                "texts of a file are (missing markers and the empty text are missing, spaces around "
                "a text trimmed); give it another label"
            )


def _column_names(X: Any, n: int) -> list[str]:
    """A DataFrame's column names, else x0, x1, … (scikit-learn's names for array columns)."""
    if hasattr(X, "columns"):
        return [str(c) for c in X.columns]
    return [f"x{j}" for j in range(n)]


def _free_name(name: str, taken: Sequence[str]) -> str:
    """``name``, or ``name_1``, ``name_2``… when a feature has it."""
    candidate, i = name, 0
    while candidate in taken:
        i += 1
        candidate = f"{name}_{i}"
    return candidate
