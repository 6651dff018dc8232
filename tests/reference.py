"""A slow, obvious reference for P(class | observed features), and random models to test against.

``reference_proba`` enumerates every joint assignment of a network's variables
(itertools.product), multiplies every node's CPT entry, then sums the assignments that
agree with a row's observed codes per class. Independent of ``store.inference`` on purpose.
Small models only: the joint of a network has prod(cards) entries (memoised per Network).

``models`` is a hypothesis strategy over ``tests.model_factory.random_model``: any DAG
(the class anywhere in the order, so it may have parents), Dirichlet CPTs, and for
ensembles several networks, each over a random subset of features.
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from bnserve.store.model import MEAN_POSTERIOR, PRODUCT_JOINT, SINGLE, Model, Network
from tests.model_factory import random_model


def joint_table(network: Network, cards: dict[str, int]) -> tuple[list[str], np.ndarray]:
    """(variable names, P(all variables)) with one axis per network node, in node order."""
    names = [n.name for n in network.nodes]
    axis = {name: i for i, name in enumerate(names)}
    table = np.zeros([cards[name] for name in names])
    for assignment in itertools.product(*(range(cards[name]) for name in names)):
        p = 1.0
        for node in network.nodes:
            p *= node.cpt[(assignment[axis[node.name]], *(assignment[axis[q]] for q in node.parents))]
        table[assignment] = p
    return names, table


def reference_joint(model: Model, row: np.ndarray) -> np.ndarray:
    """(networks, classes): each network's exact P(c, x_obs) for one coded row (-1 = missing)."""
    cards = {v.name: v.cardinality for v in model.variables}
    code = {v.name: int(row[i]) for i, v in enumerate(model.features)}
    class_name = model.class_variable.name
    out = []
    for network in model.networks:
        names, table = _joint_cached(network, cards)
        selection = tuple(slice(None) if name == class_name or code[name] < 0 else code[name] for name in names)
        consistent = table[selection]  # remaining axes: the class and the missing features
        kept = [name for name in names if name == class_name or code[name] < 0]
        class_axis = kept.index(class_name)
        out.append(consistent.sum(axis=tuple(a for a in range(len(kept)) if a != class_axis)))
    return np.array(out)


def reference_proba(model: Model, codes: np.ndarray) -> np.ndarray:
    """(rows, classes) posterior per the model's combination rule, one row at a time."""
    result = []
    for row in codes:
        joints = reference_joint(model, row)
        if model.combination == MEAN_POSTERIOR:
            result.append(np.mean([j / j.sum() for j in joints], axis=0))
        elif model.combination == PRODUCT_JOINT:  # the product of the joints, in logs (it underflows)
            log = np.log(joints).sum(axis=0)
            result.append(np.exp(log - log.max()) / np.exp(log - log.max()).sum())
        else:  # single, or mean_joint: the mean of the joints
            mean = joints.mean(axis=0)
            result.append(mean / mean.sum())
    return np.array(result)


_CACHE: dict[int, tuple[Network, tuple[list[str], np.ndarray]]] = {}


def _joint_cached(network: Network, cards: dict[str, int]) -> tuple[list[str], np.ndarray]:
    hit = _CACHE.get(id(network))
    if hit is None or hit[0] is not network:
        if len(_CACHE) > 64:
            _CACHE.clear()
        hit = _CACHE[id(network)] = (network, joint_table(network, cards))
    return hit[1]


# ------------------------------------------------------------------ random models


@st.composite
def models(draw, combination: str = SINGLE, max_features: int = 6, max_card: int = 4) -> Model:
    """A random valid Model from ``tests.model_factory.random_model``: features 1..max_features,
    cards 2..max_card, any DAG per network (class anywhere); ensembles of 1-3 networks over
    random feature subsets."""
    n_networks = 1 if combination == SINGLE else draw(st.integers(1, 3))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return random_model(
        rng,
        n_features=draw(st.integers(1, max_features)),
        cardinalities=(2, max_card),
        n_networks=n_networks,
        combination=combination,
        all_features=combination == SINGLE,
    )


@st.composite
def coded_rows(draw, model: Model, max_rows: int = 6, allow_missing: bool = True) -> np.ndarray:
    """(rows, n_features) int codes, each in [-1, card) (-1 = missing) or [0, card) without missing."""
    n_rows = draw(st.integers(1, max_rows))
    low = -1 if allow_missing else 0
    rows = [[draw(st.integers(low, v.cardinality - 1)) for v in model.features] for _ in range(n_rows)]
    return np.array(rows, dtype=np.intp).reshape(n_rows, len(model.features))
