"""Structure learners, one module per family. Each module lists its learners in a
``LEARNERS`` tuple of ``base.Learner``; ``registry`` finds them by name, importing a family's
module on first use, from ``index`` (written from those tuples: run ``python -m
bnserve.trainer.learners.registry`` after adding a learner or a parameter)."""
