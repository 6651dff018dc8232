"""The model contract: any Bayesian network classifier as variables, DAGs and CPTs, what
every learner produces and the server serves (``network``), how raw values become states
(``variable``, ``discretization``) and what a value unseen in training becomes
(``unseen``), how a model travels as data (``serialization``), and the rules for names,
aliases and versions (``names``).

The names load on first use (``bnserve.lazy``): a command line that only needs a name
rule (``names``) does not import numpy with the networks."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bnserve import lazy

if TYPE_CHECKING:
    from bnserve.store.model.markers import DEFAULT_UNKNOWN, READ_AS_MISSING, REFUSE, UNKNOWN_POLICIES
    from bnserve.store.model.names import MAX_NAME_LENGTH
    from bnserve.store.model.network import (
        COMBINATIONS,
        CPT_DTYPE,
        MEAN_JOINT,
        MEAN_POSTERIOR,
        NORMALISATION_TOLERANCE,
        PRODUCT_JOINT,
        SINGLE,
        Model,
        Network,
        Node,
    )
    from bnserve.store.model.unseen import settle_unknown, unknown_policy, unseen_code
    from bnserve.store.model.variable import (
        CLASS,
        FEATURE,
        KINDS,
        MISSING,
        MISSING_LABEL,
        NOMINAL,
        NUMERIC,
        ROLES,
        UNKNOWN,
        Variable,
    )

__all__ = [
    "CLASS",
    "COMBINATIONS",
    "CPT_DTYPE",
    "DEFAULT_UNKNOWN",
    "FEATURE",
    "KINDS",
    "MAX_NAME_LENGTH",
    "MEAN_JOINT",
    "MEAN_POSTERIOR",
    "MISSING",
    "MISSING_LABEL",
    "NOMINAL",
    "NORMALISATION_TOLERANCE",
    "NUMERIC",
    "PRODUCT_JOINT",
    "READ_AS_MISSING",
    "REFUSE",
    "ROLES",
    "SINGLE",
    "UNKNOWN",
    "UNKNOWN_POLICIES",
    "Model",
    "Network",
    "Node",
    "Variable",
    "settle_unknown",
    "unknown_policy",
    "unseen_code",
]

_NAMES = ("MAX_NAME_LENGTH",)
_NETWORK = (
    "COMBINATIONS",
    "CPT_DTYPE",
    "MEAN_JOINT",
    "MEAN_POSTERIOR",
    "NORMALISATION_TOLERANCE",
    "PRODUCT_JOINT",
    "SINGLE",
    "Model",
    "Network",
    "Node",
)
_MARKERS = ("DEFAULT_UNKNOWN", "READ_AS_MISSING", "REFUSE", "UNKNOWN_POLICIES")
_UNSEEN = (
    "settle_unknown",
    "unknown_policy",
    "unseen_code",
)

_WHERE = {
    **dict.fromkeys(_NAMES, "names"),
    **dict.fromkeys(_MARKERS, "markers"),
    **dict.fromkeys(_NETWORK, "network"),
    **dict.fromkeys(_UNSEEN, "unseen"),
}
__getattr__, __dir__ = lazy.exports(__name__, {name: _WHERE.get(name, "variable") for name in __all__})
