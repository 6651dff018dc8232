"""Data for trainer tests: the shared benchmark sets, and small hand-made ones.

Import as ``from tests.data_helpers import dataset, make, accuracy``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from store.inference import compile_model
from store.model import CLASS, Variable
from trainer.data import EncodedData, load

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def dataset_path(name: str) -> Path:
    """``../shared/datasets/NAME.csv``; the test is skipped where the folder is absent."""
    path = DATASETS / f"{name}.csv"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def dataset(name: str, **load_options) -> EncodedData:
    """``../shared/datasets/NAME.csv``, encoded (``load_options`` go to ``trainer.data.load``)."""
    return load(str(dataset_path(name)), **load_options)


def make(columns, cards, y, n_classes) -> EncodedData:
    """Hand-made data: features x0, x1, … with states "0", "1", …, class "class"."""
    variables = tuple(Variable(f"x{i}", tuple(map(str, range(c)))) for i, c in enumerate(cards))
    variables += (Variable("class", tuple(map(str, range(n_classes))), CLASS),)
    return EncodedData(variables, np.stack(columns, axis=1).astype(np.int32), np.asarray(y, np.int64), 0, "hand")


def accuracy(model, data: EncodedData) -> float:
    """Resubstitution accuracy of ``model`` on ``data`` through the compiled predictor."""
    return float(np.mean(np.argmax(compile_model(model).predict_proba(data.X), axis=1) == data.y))
