"""Structure learners, one module per family. Each module lists its learners in a
``LEARNERS`` tuple of ``base.Learner``; ``registry`` collects them."""
