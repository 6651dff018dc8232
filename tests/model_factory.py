"""Small random valid ``Model``s for tests: any DAG over class and features, Dirichlet CPTs.

Import as ``from tests.model_factory import random_model``. Everything comes from the
``rng`` passed in, so the same seed gives the same model.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from bnserve.store.model import CLASS, FEATURE, MEAN_JOINT, NUMERIC, SINGLE, Model, Network, Node, Variable
from bnserve.store.model.discretization import interval_labels
from bnserve.store.model.projection import Projection

CLASS_NAME = "class"


def random_model(
    rng: np.random.Generator,
    *,
    n_features: int = 4,
    cardinalities: tuple[int, int] = (2, 4),
    n_networks: int = 1,
    combination: str | None = None,
    max_parents: int = 3,
    class_has_parents: bool = True,
    all_features: bool = True,
    alpha: float = 1.0,
    dtype: np.dtype | type = np.float64,
    algorithm: str = "random-dag",
    numeric: float = 0.0,
    derived: int = 0,
) -> Model:
    """A valid model with features ``f0..f{n-1}`` and class ``class``.

    cardinalities: inclusive (low, high) number of states per variable, class included.
    Each network is a random DAG (the class may have parents unless ``class_has_parents``
    is False) with at most ``max_parents`` parents per node in random order, nodes listed
    in random (not topological) order; with ``all_features`` False each network keeps a
    random subset of the features. ``combination`` defaults to single for one network,
    mean_joint for several. CPTs are Dirichlet(alpha) draws, shape (node, *parents).
    Each feature is numeric (random cut points) with probability ``numeric``; ``derived``
    more features ``d0..`` are projections (``Projection``) of a random subset of the numeric
    ones, when there are any.
    """
    low, high = cardinalities
    class_variable = Variable(CLASS_NAME, _states(CLASS_NAME, int(rng.integers(max(low, 2), high + 1))), CLASS)
    features = [_feature(rng, f"f{i}", int(rng.integers(low, high + 1)), numeric) for i in range(n_features)]
    numbers = [v.name for v in features if v.kind == NUMERIC]
    for i in range(derived if numbers else 0):
        inputs = tuple(rng.choice(numbers, size=int(rng.integers(1, len(numbers) + 1)), replace=False).tolist())
        projection = Projection(
            inputs, tuple(rng.normal(size=len(inputs)).tolist()), tuple(rng.normal(size=len(inputs)).tolist())
        )
        plain = _feature(rng, f"d{i}", int(rng.integers(max(low, 2), high + 1)), 1.0)
        features.append(dataclasses.replace(plain, projection=projection))
    variables = (class_variable, *features)
    cards = {v.name: v.cardinality for v in variables}
    networks = tuple(
        _random_network(rng, cards, features, max_parents, class_has_parents, all_features, alpha, np.dtype(dtype))
        for _ in range(n_networks)
    )
    if combination is None:
        combination = SINGLE if n_networks == 1 else MEAN_JOINT
    return Model(
        variables=variables,
        networks=networks,
        algorithm=algorithm,
        combination=combination,
        params={"alpha": alpha, "max_parents": max_parents, "networks": n_networks},
        metadata={
            "n_rows": int(rng.integers(10, 10_000)),
            "fingerprint": f"{int(rng.integers(2**62)):016x}",
            "evaluation": {"accuracy": float(rng.random()), "folds": [1, 2, 3], "note": None, "ok": True},
        },
    ).validate()


def kdb_model(
    rng: np.random.Generator, *, n_features: int = 20, states: int = 12, n_classes: int = 3, k: int = 3
) -> Model:
    """A k-dependence classifier shaped like ``trainer fit kdb``'s: every feature has ``states``
    states and as parents the class and ``min(i, k)`` features drawn among ``f0..f{i-1}``."""
    class_variable = Variable(CLASS_NAME, _states(CLASS_NAME, n_classes), CLASS)
    features = [Variable(f"f{i}", _states(f"f{i}", states), FEATURE) for i in range(n_features)]
    nodes = [Node(CLASS_NAME, (), random_cpt(rng, n_classes, ()))]
    for i, feature in enumerate(features):
        parents = tuple(f"f{int(j)}" for j in rng.choice(i, size=min(i, k), replace=False))
        nodes.append(
            Node(feature.name, (CLASS_NAME, *parents), random_cpt(rng, states, (n_classes,) + (states,) * len(parents)))
        )
    return Model((class_variable, *features), (Network(tuple(nodes)),), "kdb", params={"k": k}).validate()


def random_cpt(
    rng: np.random.Generator,
    card: int,
    parent_cards: tuple[int, ...],
    alpha: float = 1.0,
    dtype: np.dtype | type = np.float64,
) -> np.ndarray:
    """A CPT of shape (card, *parent_cards) whose every column is a Dirichlet(alpha) draw."""
    draws = rng.dirichlet(np.full(card, alpha), size=math.prod(parent_cards))  # (configs, card)
    cpt = draws.T.reshape((card, *parent_cards)).astype(dtype)
    return cpt / cpt.sum(axis=0, keepdims=True)


def _random_network(
    rng: np.random.Generator,
    cards: dict[str, int],
    features: list[Variable],
    max_parents: int,
    class_has_parents: bool,
    all_features: bool,
    alpha: float,
    dtype: np.dtype,
) -> Network:
    names = [f.name for f in features if all_features or rng.random() < 0.7]
    order = [names[i] for i in rng.permutation(len(names))]
    if class_has_parents:
        order.insert(int(rng.integers(len(order) + 1)), CLASS_NAME)
    else:
        order.insert(0, CLASS_NAME)
    nodes = []
    for i, name in enumerate(order):
        k = int(rng.integers(0, min(max_parents, i) + 1))
        parents = tuple(order[j] for j in rng.choice(i, size=k, replace=False)) if k else ()
        cpt = random_cpt(rng, cards[name], tuple(cards[p] for p in parents), alpha, dtype)
        nodes.append(Node(name, parents, cpt))
    return Network(tuple(nodes[j] for j in rng.permutation(len(nodes))))


def _feature(rng: np.random.Generator, name: str, card: int, numeric: float) -> Variable:
    if numeric and rng.random() < numeric:
        cuts = tuple(float(c) for c in np.sort(rng.choice(np.arange(-50, 50) * 0.25, size=card - 1, replace=False)))
        return Variable(name, interval_labels(cuts), FEATURE, NUMERIC, cuts)
    return Variable(name, _states(name, card), FEATURE)


def _states(name: str, card: int) -> tuple[str, ...]:
    return tuple(f"{name}:s{j}" for j in range(card))
