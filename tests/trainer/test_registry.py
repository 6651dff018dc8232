"""The learner index the command line reads is what the learner modules declare."""

from __future__ import annotations

from bnserve.trainer.learners import index, registry


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
