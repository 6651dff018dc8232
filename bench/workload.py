"""The data every suite module uses: one calibrated synthetic network, its samples on disk.

A k = 2 network over n = 50 features (2..4 states), c = 3 classes, its class signal set so
that the Bayes-optimal accuracy is near 80 % (``bench.synthetic.calibrate``); a training
sample as large as the largest training size (a prefix of it is a sample of any smaller
size) and a held-out test sample, saved as .npy files so that worker processes load the
very same arrays. No missing values: scikit-learn's CategoricalNB needs codes >= 0.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import time
from dataclasses import dataclass

import numpy as np

from bench.synthetic import SyntheticNetwork, bayes_optimal, calibrate, random_network, sample
from bnserve.store.model import Variable
from bnserve.trainer.data import EncodedData

SHAPE = {"n_features": 50, "max_states": 4, "n_classes": 3, "k": 2}
SEED = 0
TARGET_ACCURACY = 0.80


@dataclass(frozen=True)
class Workload:
    directory: pathlib.Path
    network: SyntheticNetwork
    train_rows: int
    test_rows: int
    bayes_accuracy: float
    bayes_expected_accuracy: float
    seconds: float

    def describe(self) -> str:
        return (
            f"synthetic k=2 network, n={SHAPE['n_features']} features with 2..{SHAPE['max_states']} states, "
            f"c={SHAPE['n_classes']} classes, seed {SEED}, class signal {self.network.strength:.3f} "
            f"(Bayes-optimal accuracy {self.bayes_accuracy:.4f} on the {self.test_rows:,} test rows)"
        )

    def train(self, rows: int) -> EncodedData:
        """The first ``rows`` training rows (an independent sample of that size)."""
        return load(self.directory, "train", rows)

    def test(self) -> EncodedData:
        return load(self.directory, "test", self.test_rows)


def variables() -> tuple[Variable, ...]:
    return random_network(SEED, **SHAPE).variables


def load(directory: pathlib.Path, name: str, rows: int) -> EncodedData:
    """The first ``rows`` rows of a saved sample (C order, as the file readers produce), read
    straight into their arrays: nothing else is held, so a worker's peak RSS after loading is
    the data's."""
    X = _read_rows(directory / f"{name}_X.npy", rows)
    y = _read_rows(directory / f"{name}_y.npy", rows)
    return EncodedData(variables(), X, y, 0, f"synthetic:{name}")


def _read_rows(path: pathlib.Path, rows: int) -> np.ndarray:
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(f)
        if fortran:
            raise ValueError(f"{path}: expected a C-ordered array")
        rows = min(rows, shape[0])
        width = int(np.prod(shape[1:], dtype=np.int64))
        return np.fromfile(f, dtype=dtype, count=rows * width).reshape((rows, *shape[1:]))


def prepare(directory: pathlib.Path, train_rows: int, test_rows: int) -> Workload:
    t0 = time.perf_counter()
    network = calibrate(random_network(SEED, **SHAPE), TARGET_ACCURACY)
    test = sample(network, test_rows, SEED + 2)
    best = bayes_optimal(network, test)
    train = sample(network, train_rows, SEED + 1)
    for name, data in (("train", train), ("test", test)):
        np.save(directory / f"{name}_X.npy", data.X)
        np.save(directory / f"{name}_y.npy", data.y)
    return Workload(
        directory, network, train_rows, test_rows, best.accuracy, best.expected_accuracy, time.perf_counter() - t0
    )


def worker_result(script: str, args: list[str], what: str) -> dict:
    """``python SCRIPT --worker ARGS`` in a fresh interpreter (its memory and caches its own):
    the JSON object its last line of output holds; RuntimeError naming ``what`` if it fails."""
    out = subprocess.run([sys.executable, script, "--worker", *args], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{what} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])
