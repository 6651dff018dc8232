"""The learner index the command line reads is what the learner modules declare, and each
learner's function takes what it declares (checked when its module is imported)."""

from __future__ import annotations

import importlib.util

import pytest

from bnserve.trainer.data import TrainingView
from bnserve.trainer.learners import index, registry
from bnserve.trainer.learners.base import Learner, Param, checked_signature
from bnserve.trainer.learners.structure import Structure
from bnserve.trainer.learners.tan import tan


def test_the_index_is_what_the_modules_declare():
    """Stale after a learner or a parameter is added or changed: run
    ``python -m bnserve.trainer.learners.registry`` and ``ruff format trainer/learners/index.py``."""
    modules, streamable, params = registry.declared()
    assert (index.MODULES, index.STREAMABLE, index.PARAMETERS) == (modules, streamable, params)


def test_a_learner_is_found_by_name_in_its_module():
    learners = registry.collect()
    assert list(registry.LEARNERS) == list(learners)
    assert all(registry.LEARNERS[name] is learner for name, learner in learners.items())
    assert registry.LEARNERS.get("no-such-learner") is None
    assert registry.STREAMABLE == tuple(n for n, learner in learners.items() if learner.counts_only)


def test_a_parameter_is_its_first_learners_declaration_and_its_flag_converts_alike():
    learners = registry.collect()
    for name, param in registry.PARAMETERS.items():
        first = next(p for learner in learners.values() for p in learner.params if p.name == name)
        assert param is first
        flag = registry.FLAGS[name]
        assert flag.flag == param.flag and flag.needs_rows == param.needs_rows
    assert registry.FLAGS["k"].type("0..2") == [0, 1, 2] and registry.FLAGS["k"].type.__name__ == "int_or_range"
    assert registry.FLAGS["alpha"].type is float


# ------------------------------------------------------------------ signatures checked at registration


def test_every_learner_takes_what_it_declares():
    """Each registered learner's function takes the data, then exactly its declared
    parameters; it learns from counts alone exactly when it takes the training view."""
    for name, learner in registry.collect().items():
        counts_only = checked_signature(name, learner.learn, learner.params)
        assert counts_only == learner.counts_only == (name in registry.STREAMABLE)


ALPHA = Param("alpha", float, 0.05, "a level")
OFF = Param("limit", int, None, "a bound; none by default")


def _misnamed(data: TrainingView, alpah: float) -> Structure: ...
def _undeclared(data: TrainingView, alpha: float, beta: float) -> Structure: ...
def _other_default(data: TrainingView, alpha: float = 0.1) -> Structure: ...
def _not_off(data: TrainingView, limit: int) -> Structure: ...
def _positional(data: TrainingView, *alpha: float) -> Structure: ...
def _no_view(data: str, alpha: float) -> Structure: ...
def _no_data(*, alpha: float) -> Structure: ...
def _unimported(data: Unimported, alpha: float) -> Structure: ...  # noqa: F821


@pytest.mark.parametrize(
    "learn, params, message",
    [
        (_misnamed, (ALPHA,), "takes 'alpah', which it does not declare"),
        (_undeclared, (ALPHA,), "takes 'beta', which it does not declare"),
        (_other_default, (ALPHA,), "parameter 'alpha' defaults to 0.1, but is declared with 0.05"),
        (_not_off, (OFF,), "parameter 'limit' is declared off \\(None\\) by default, but takes int, not None"),
        (_positional, (ALPHA,), "takes \\*alpha"),
        (_no_view, (ALPHA,), "its data parameter 'data' must be a TrainingView .* or EncodedData"),
        (_no_data, (ALPHA,), "its first parameter, 'alpha', must be the data"),
        (_unimported, (ALPHA,), "its annotations must name what its module imports: name 'Unimported' is not defined"),
        (tan, (ALPHA,), "it declares parameter 'alpha', which its function does not take"),
    ],
)
def test_a_learner_whose_function_does_not_take_its_parameters_is_refused(learn, params, message):
    with pytest.raises(TypeError, match=f"^learner 'wrong': .*{message}"):
        Learner("wrong", learn, "a learner declared wrong", params)


def test_a_family_module_with_a_misnamed_parameter_fails_at_import(tmp_path):
    """The check runs where ``LEARNERS`` is built: importing the module, not at a user's fit."""
    path = tmp_path / "wrong_family.py"
    path.write_text(
        "from bnserve.trainer.data import TrainingView\n"
        "from bnserve.trainer.learners.base import Learner, Param\n"
        "def kdb(data: TrainingView, k: int, thetta: float | None = None): ...\n"
        "LEARNERS = (Learner('kdb2', kdb, 'kdb misspelt', (Param('k', int, 2, 'k'), Param('theta', float, None, 't'))),)\n"
    )
    spec = importlib.util.spec_from_file_location("wrong_family", path)
    assert spec is not None and spec.loader is not None
    with pytest.raises(TypeError, match="learner 'kdb2': its function takes 'thetta', which it does not declare"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
