"""The contract's CPT value checks over all of a model's CPTs at once (issue 30: a server
validates every version it loads): they never let pass what the per-node checks refuse,
and they cost a few numpy calls per model, not some ten per node."""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest

from bnserve.store.errors import InvalidModel
from bnserve.store.model import NORMALISATION_TOLERANCE, Model
from bnserve.store.model import network as contract
from tests.model_factory import random_model


def with_cpt(model: Model, k: int, j: int, cpt: np.ndarray) -> Model:
    """``model`` with the CPT of node ``j`` of network ``k`` replaced."""
    net = model.networks[k]
    node = dataclasses.replace(net.nodes[j], cpt=cpt)
    nodes = (*net.nodes[:j], node, *net.nodes[j + 1 :])
    networks = (*model.networks[:k], dataclasses.replace(net, nodes=nodes), *model.networks[k + 1 :])
    return dataclasses.replace(model, networks=networks)


def per_node_verdict(model: Model) -> str | None:
    """What the per-node checks alone say: None (valid) or the first fault's message."""
    cards = {v.name: v.cardinality for v in model.variables}
    try:
        for i, net in enumerate(model.networks):
            contract._validate_network(net, i, cards, model.class_variable.name, values_pass=False)
    except InvalidModel as exc:
        return exc.message
    return None


def faults(model: Model, rng: np.random.Generator) -> list[Model]:
    """``model`` with one CPT entry changed each way the value checks look at, some of them
    just inside and just outside the tolerance."""
    out = []
    for k, net in enumerate(model.networks):
        j = int(rng.integers(len(net.nodes)))
        cpt = net.nodes[j].cpt
        for change in (np.nan, np.inf, -1e-300, -0.5, 1e-9 * 0.999, 1e-9 * 1.001, 3e-9, 1e-12, 0.1):
            bad = cpt.copy()
            where = tuple(int(rng.integers(s)) for s in cpt.shape)
            bad[where] = change if change in (np.nan, np.inf) or change < 0 else bad[where] + change
            out.append(with_cpt(model, k, j, bad))
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_checks_over_all_cpts_pass_a_valid_model_and_never_a_faulty_one(seed):
    rng = np.random.default_rng(seed)
    model = random_model(rng, n_features=3 + seed % 7, n_networks=1 + seed % 3, cardinalities=(2, 2 + seed % 9))
    assert contract._cpt_values_pass(model.networks)
    for faulty in faults(model, rng):
        verdict = per_node_verdict(faulty)
        if verdict is not None:
            assert not contract._cpt_values_pass(faulty.networks)
            with pytest.raises(InvalidModel) as raised:
                faulty.validate()
            assert raised.value.message == verdict


def test_a_model_of_other_float_types_is_checked_node_by_node():
    rng = np.random.default_rng(1)
    model = random_model(rng, dtype=np.float32)
    assert not contract._cpt_values_pass(model.networks)
    model.validate()
    net = model.networks[0]
    bad = net.nodes[0].cpt.copy()
    bad.flat[0] += 0.01
    with pytest.raises(InvalidModel, match="has a distribution summing to 1"):
        with_cpt(model, 0, 0, bad).validate()


def test_a_column_off_by_just_over_the_tolerance_is_refused():
    model = random_model(np.random.default_rng(2))
    cpt = model.networks[0].nodes[-1].cpt.copy()
    cpt.reshape(cpt.shape[0], -1)[0, -1] += 2 * NORMALISATION_TOLERANCE
    with pytest.raises(InvalidModel, match="has a distribution summing to 1"):
        with_cpt(model, 0, len(model.networks[0].nodes) - 1, cpt).validate()


def test_validating_a_model_costs_a_few_numpy_calls_whatever_its_nodes():
    """Counted as calls into numpy's Python functions (np.all, np.any, ...): the per-node
    checks made several per node, so a load of a thousand versions spent 0.6 s in them."""
    model = random_model(np.random.default_rng(3), n_features=200, max_parents=2)
    calls = 0

    def count(frame, event, arg):
        nonlocal calls
        if event == "call" and "numpy" in frame.f_code.co_filename:
            calls += 1

    sys.setprofile(count)
    try:
        model.validate()
    finally:
        sys.setprofile(None)
    assert calls < 40, calls
