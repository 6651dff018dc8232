"""Structure learners, one module per family; each returns a ``Structure`` (no CPTs)."""

from trainer.learners.structure import Structure

__all__ = ["Structure"]
