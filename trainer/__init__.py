"""Learning Bayesian network classifiers from data files, and publishing them to the store.

Rooms, bottom first: ``io`` (files to raw tables), ``stats`` (counts and information),
``data`` (typed, preprocessed and coded data), ``learners`` (one module per family, with
their search engines and CPT estimation), ``fit`` (and ``formats`` for other tools' model
files), ``evaluation``, ``auto``, ``cli``. Docstrings cite the five papers this project
implements as "paper 000" … "paper 004": docs/references.md says which is which.
"""

if __name__ != "bnserve.trainer":  # the folder run as a top-level package: two copies of every class
    raise ImportError(f"import bnserve.trainer, not {__name__} (install the project: pip install -e .)")
