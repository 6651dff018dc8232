"""The core install is enough for ``publish``, ``load_model`` and ``Client``: in a child
process where scikit-learn and pandas cannot be imported (``None`` in ``sys.modules``, as
if not installed), a model is published, loaded back and answered by a real server on a
real port; ``load``, which returns a scikit-learn classifier, says which extra to install."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WITHOUT_EXTRAS = "import sys\nsys.modules['sklearn'] = None\nsys.modules['pandas'] = None\n"

SESSION = """
import numpy as np
import pytest

from bnserve import Client, load, load_model, publish
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from tests.model_factory import random_model

url = sys.argv[1]
model = random_model(np.random.default_rng(0))
assert publish(model, "core", aliases=["production"], store=url) == 1
loaded = load_model("core@production", store=url)
assert loaded.checksum() == model.checksum()
with pytest.raises(ModuleNotFoundError, match=r"pip install 'bnserve\\[sklearn\\]'"):
    load("core", store=url)
app = App(ServeConfig(store_url=url, host="127.0.0.1", port=0, metrics_port=-1)).start()
try:
    assert app.repository.wait_ready(30)
    with Client(f"127.0.0.1:{app.port}") as client:
        answer = client.predict("core", [{}, {}])
    assert answer.version == 1 and answer.probabilities.shape == (2, len(model.class_variable.states))
finally:
    app.stop()
assert "sklearn" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
print("core install: ok")
"""


def run_without_extras(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS + textwrap.dedent(code), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_publish_load_model_and_client_need_only_the_core_install(tmp_path):
    result = run_without_extras(SESSION, f"sqlite:///{tmp_path / 'store.db'}")
    assert result.returncode == 0, result.stderr
    assert "core install: ok" in result.stdout


def test_the_block_does_stop_scikit_learn():
    result = run_without_extras("from bnserve import BayesNetClassifier")
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr and "sklearn" in result.stderr
