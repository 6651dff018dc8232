"""Written by ``python -m bnserve.trainer.learners.registry`` from the modules' ``LEARNERS``, then
``ruff format``ted: do not edit. What the command line needs before any learner is imported."""

# learner -> the module of this package that defines it
MODULES = {
    "a2de": "ande",
    "aode": "ensembles",
    "asb": "semi_naive",
    "bsej": "semi_naive",
    "cb": "cb",
    "eskdb": "skdb",
    "ffss": "selective",
    "fkdb": "kdb",
    "fss": "selective",
    "hc": "hill_climbing",
    "info-as": "info_as",
    "k2": "k2",
    "k2-as": "k2_as",
    "k2-as-le": "k2_as",
    "kdb": "kdb",
    "laode": "ensembles",
    "nb": "naive_bayes",
    "rtan": "ensembles",
    "skdb": "skdb",
    "stan": "selective",
    "tan": "tan",
    "tan-ddr": "tan",
}
# the learners that can learn from counts alone (from a file read in chunks)
STREAMABLE = ("a2de", "aode", "eskdb", "fkdb", "kdb", "laode", "nb", "skdb", "tan", "tan-ddr")
# parameter -> (its first learner, its type's name, needs the rows, help by learner)
PARAMETERS = {
    "alpha": (
        "asb",
        "float",
        False,
        "asb, ffss, stan: significance level of the χ² (G) tests of (conditional) independence (default 0.05)",
    ),
    "max_parents": (
        "cb",
        "int",
        False,
        "cb, info-as, k2, k2-as, k2-as-le: maximum number of K2 parents per node (default: no bound; the Cooper-Herskovits score stops the search)",
    ),
    "k": (
        "eskdb",
        "int_or_range",
        False,
        "eskdb, skdb: the largest k tried (default 5, as Martínez et al.); the leave-one-out picks k' <= k; fkdb, hc, kdb: maximum number of feature parents per feature (default 2; a range A..B with auto)",
    ),
    "loss": (
        "eskdb",
        "str",
        False,
        "eskdb, skdb: leave-one-out loss that selects the model: rmse (the paper's, default) or zero-one",
    ),
    "members": (
        "eskdb",
        "int",
        False,
        "eskdb: number of ensemble members (default 5); rtan: number of ensemble members (default 10)",
    ),
    "sample_seed": (
        "eskdb",
        "int",
        False,
        "eskdb: seed of the random attribute orders (default 0); rtan: seed of the bootstrap samples (default 0)",
    ),
    "fd_min_count": (
        "fkdb",
        "int",
        True,
        "fkdb: one-to-one functional-dependency rule of paper 001 with minimum support l (paper: 100); default off",
    ),
    "start": ("hc", "str", False, "hc: the network the search starts from, fkdb or empty (default fkdb)"),
    "tabu": (
        "hc",
        "int",
        False,
        "hc: moves a changed pair of features stays tabu; 0 = plain hill climbing (default 10)",
    ),
    "tabu_steps": ("hc", "int", False, "hc: moves without a better score before the search stops (default 20)"),
    "metric": ("info-as", "str", False, "info-as: the selection metric, cig, cgr or cdc (default cgr)"),
    "order": (
        "k2",
        "str",
        False,
        "k2: the K2 variable order, A,B,... naming every variable (the class too) once (default: the class, then the features by I(X;C) descending)",
    ),
    "theta": (
        "kdb",
        "float",
        False,
        "kdb: KDB-θ: add an arc only where I(Xi;Xj|C) > θ nats (Sahami: 0.03); default none, as 0",
    ),
}
