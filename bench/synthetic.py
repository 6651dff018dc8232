"""Synthetic data from a random k-dependence Bayesian network classifier, with its Bayes-optimal accuracy.

    python bench/synthetic.py [--features 50] [--states 4] [--classes 3] [--k 2] [--target 0.8]
                              [--rows 100000] [--seed 0]

The network: a class with ``c`` states and a Dirichlet prior; ``n`` features, each with
2..``v`` states (drawn uniformly), added in a random order; each feature has the class
plus ``min(position, k)`` features drawn among those added before it as parents. Every
feature CPT mixes, per configuration of its feature parents, a distribution shared by
all classes with a class-specific one (both Dirichlet(``alpha``) draws):

    P(x | c, pa) = (1 - strength) * shared(x | pa) + strength * specific(x | c, pa)

so ``strength`` in [0, 1] sets how strongly the class drives the features (0: the
features say nothing about the class) while the dependence between features stays.
The draws are fixed by the seed; ``with_strength`` changes only the mixing, so the
Bayes-optimal accuracy moves smoothly with the knob and ``calibrate`` can bisect on it.

The network is a ``bnserve.store.model.Model`` (one network, combination ``single``), so
``bnserve.store.predictor.compile_model`` computes its exact posterior: the Bayes-optimal
classifier. ``sample`` draws rows by ancestral sampling in topological order, one
uniform draw per node over all rows and a lookup in the cumulative CPT (no loop over
rows), and returns ``bnserve.trainer.data.EncodedData`` with no missing values.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time
from dataclasses import dataclass

import numpy as np

if __package__ in (None, ""):  # run as a script: make the repository importable as ``bench``
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from bnserve.store.model import CLASS, FEATURE, Model, Network, Node, Variable
from bnserve.store.predictor import compile_model
from bnserve.trainer.data import EncodedData

CLASS_NAME = "class"
CLASS_PRIOR_CONCENTRATION = 10.0  # Dirichlet of the class prior: roughly balanced classes


@dataclass(frozen=True)
class SyntheticNetwork:
    """A random k-dependence network and the draws it is made of.

    ``order``: feature columns in the order they were added (a topological order);
    ``parents[i]``: the feature parents of column ``i`` (column indices, each earlier in
    ``order``); ``shared[i]`` (card_i, 1, *parent cards) and ``specific[i]`` (card_i,
    c, *parent cards) are the two Dirichlet draws that ``strength`` mixes.
    """

    cards: tuple[int, ...]
    n_classes: int
    k: int
    order: tuple[int, ...]
    parents: tuple[tuple[int, ...], ...]
    prior: np.ndarray
    shared: tuple[np.ndarray, ...]
    specific: tuple[np.ndarray, ...]
    strength: float
    alpha: float

    @property
    def variables(self) -> tuple[Variable, ...]:
        """Features ``x00``, ``x01``, … in column order, then the class (``EncodedData``'s order)."""
        width = len(str(max(len(self.cards) - 1, 1)))
        features = tuple(
            Variable(f"x{i:0{width}d}", tuple(f"s{j}" for j in range(card)), FEATURE)
            for i, card in enumerate(self.cards)
        )
        return features + (Variable(CLASS_NAME, tuple(f"c{j}" for j in range(self.n_classes)), CLASS),)

    def cpt(self, i: int) -> np.ndarray:
        """P(x_i | class, parents), axes (x_i, class, *feature parents), float64."""
        cpt = (1.0 - self.strength) * self.shared[i] + self.strength * self.specific[i]
        return cpt / cpt.sum(axis=0, keepdims=True)

    def with_strength(self, strength: float) -> SyntheticNetwork:
        """The same draws mixed with another ``strength`` in [0, 1]."""
        if not 0.0 <= strength <= 1.0:
            raise ValueError(f"strength must be in [0, 1], got {strength}")
        return SyntheticNetwork(
            self.cards,
            self.n_classes,
            self.k,
            self.order,
            self.parents,
            self.prior,
            self.shared,
            self.specific,
            float(strength),
            self.alpha,
        )

    @property
    def model(self) -> Model:
        """The true network as the model contract (validated)."""
        cached = self.__dict__.get("_model")
        if cached is None:
            variables = self.variables
            names = [v.name for v in variables]
            nodes = [Node(CLASS_NAME, (), self.prior.copy())]
            for i in self.order:
                nodes.append(Node(names[i], (CLASS_NAME, *(names[j] for j in self.parents[i])), self.cpt(i)))
            cached = Model(
                variables,
                (Network(tuple(nodes)),),
                "synthetic-kdb",
                params={"k": self.k, "strength": self.strength, "alpha": self.alpha},
            ).validate()
            object.__setattr__(self, "_model", cached)
        return cached


def random_network(
    seed: int | np.random.Generator = 0,
    *,
    n_features: int = 50,
    max_states: int = 4,
    n_classes: int = 3,
    k: int = 2,
    strength: float = 0.5,
    alpha: float = 1.0,
) -> SyntheticNetwork:
    """Draw a random k-dependence network (see the module docstring); same seed, same network."""
    if max_states < 2 or n_classes < 2 or n_features < 1 or k < 0:
        raise ValueError("need n_features >= 1, max_states >= 2, n_classes >= 2, k >= 0")
    rng = np.random.default_rng(seed)
    cards = tuple(int(c) for c in rng.integers(2, max_states + 1, size=n_features))
    order = tuple(int(i) for i in rng.permutation(n_features))
    parents: list[tuple[int, ...]] = [()] * n_features
    for pos, i in enumerate(order):
        q = min(pos, k)
        parents[i] = tuple(order[int(p)] for p in rng.choice(pos, size=q, replace=False)) if q else ()
    prior = rng.dirichlet(np.full(n_classes, CLASS_PRIOR_CONCENTRATION))
    shared, specific = [], []
    for i in range(n_features):
        parent_cards = tuple(cards[j] for j in parents[i])
        shared.append(_dirichlet(rng, cards[i], (1, *parent_cards), alpha))
        specific.append(_dirichlet(rng, cards[i], (n_classes, *parent_cards), alpha))
    return SyntheticNetwork(
        cards, n_classes, k, order, tuple(parents), prior, tuple(shared), tuple(specific), 0.0, alpha
    ).with_strength(strength)


def _dirichlet(rng: np.random.Generator, card: int, config_shape: tuple[int, ...], alpha: float) -> np.ndarray:
    draws = rng.dirichlet(np.full(card, alpha), size=math.prod(config_shape))  # (configs, card)
    return draws.T.reshape((card, *config_shape))


def sample(
    network: SyntheticNetwork, rows: int, seed: int | np.random.Generator = 0, source: str = "synthetic"
) -> EncodedData:
    """``rows`` rows by ancestral sampling: X int32 (rows, n) with no missing value, y int64."""
    rng = np.random.default_rng(seed)
    X = np.empty((rows, len(network.cards)), dtype=np.int32)
    y = _draw(np.cumsum(network.prior)[None, :], np.zeros(rows, dtype=np.intp), rng.random(rows))
    for i in network.order:
        family = (network.n_classes, *(network.cards[j] for j in network.parents[i]))
        config = np.ravel_multi_index([y, *(X[:, j] for j in network.parents[i])], family)
        cumulative = np.cumsum(network.cpt(i).reshape(network.cards[i], -1).T, axis=1)  # (configs, card)
        X[:, i] = _draw(cumulative, config, rng.random(rows))
    return EncodedData(network.variables, X, y.astype(np.int64), 0, source)


def _draw(cumulative: np.ndarray, config: np.ndarray, u: np.ndarray) -> np.ndarray:
    """State of each row: how many of its configuration's cumulative probabilities (bar the last) are <= u."""
    thresholds = cumulative[:, :-1]
    return np.count_nonzero(thresholds[config] <= u[:, None], axis=1).astype(np.int32)


@dataclass(frozen=True)
class BayesOptimal:
    """The true posterior's argmax on a sample: its accuracy there, and the expected accuracy
    (the mean of the largest posterior, an unbiased estimate with less variance)."""

    accuracy: float
    expected_accuracy: float
    rows: int


def bayes_optimal(network: SyntheticNetwork, data: EncodedData) -> BayesOptimal:
    """Accuracy of argmax P(c | x) under the true network on ``data``."""
    proba = compile_model(network.model).predict_proba(data.X)
    return BayesOptimal(float(np.mean(proba.argmax(axis=1) == data.y)), float(proba.max(axis=1).mean()), data.n_rows)


def calibrate(
    network: SyntheticNetwork,
    target: float,
    *,
    rows: int = 20_000,
    seed: int = 12345,
    tolerance: float = 0.003,
    steps: int = 30,
) -> SyntheticNetwork:
    """The network with ``strength`` chosen by bisection so that its expected Bayes-optimal accuracy
    (on ``rows`` rows sampled with ``seed``) is within ``tolerance`` of ``target`` (or as near as
    ``steps`` halvings get). The accuracy grows with the strength from the majority-class rate."""
    low, high = 0.0, 1.0
    best = network.with_strength(0.5)
    for _ in range(steps):
        mid = (low + high) / 2
        best = network.with_strength(mid)
        got = bayes_optimal(best, sample(best, rows, seed)).expected_accuracy
        if abs(got - target) <= tolerance:
            break
        low, high = (mid, high) if got < target else (low, mid)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--features", type=int, default=50)
    parser.add_argument("--states", type=int, default=4, help="maximum states per feature (drawn in 2..v)")
    parser.add_argument("--classes", type=int, default=3)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--alpha", type=float, default=1.0, help="Dirichlet concentration of the CPT draws")
    parser.add_argument("--strength", type=float, default=None, help="class signal in [0, 1] (default: calibrate)")
    parser.add_argument("--target", type=float, default=0.8, help="Bayes-optimal accuracy to calibrate to")
    parser.add_argument("--rows", type=int, default=100_000, help="test rows for the Bayes-optimal accuracy")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    network = random_network(
        args.seed, n_features=args.features, max_states=args.states, n_classes=args.classes, k=args.k, alpha=args.alpha
    )
    t0 = time.perf_counter()
    network = network.with_strength(args.strength) if args.strength is not None else calibrate(network, args.target)
    t1 = time.perf_counter()
    test = sample(network, args.rows, args.seed + 1)
    t2 = time.perf_counter()
    best = bayes_optimal(network, test)
    arcs = sum(len(p) for p in network.parents)
    print(
        f"network: n={args.features} features (2..{args.states} states), c={args.classes} classes, k={args.k}, "
        f"{arcs} feature arcs, alpha={args.alpha}, strength={network.strength:.4f}"
        + ("" if args.strength is not None else f" (calibrated to {args.target} in {t1 - t0:.1f} s)")
    )
    print(f"sampled {args.rows} rows in {t2 - t1:.2f} s; class counts {np.bincount(test.y).tolist()}")
    print(f"Bayes-optimal accuracy on them: {best.accuracy:.4f} (expected {best.expected_accuracy:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
