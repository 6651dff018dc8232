"""Sufficient statistics, in one place, for every learner: counts (``counts``), information
measures (``information``), the pairwise tables and matrices (``pairs``), tests of
independence (``independence``), functional dependencies (``dependencies``) and family
scores (``scores``). Columns are integer codes, -1 = missing; counts are available-case;
information is in nats."""

from bnserve.trainer.stats.counts import (
    COMPARED_VALUES,
    TRANSPOSE_ROWS,
    feature_columns,
    joint_code,
    joint_column,
    joint_counts,
    occurring_instantiations,
    shifted_codes,
    value_counts,
)
from bnserve.trainer.stats.dependencies import functional_dependency_matrix
from bnserve.trainer.stats.independence import (
    ALPHA,
    MIN_EXPECTED_PER_CELL,
    IndependenceTest,
    conditional_g_test,
    conditional_independence_test,
    independence_given_test,
    independence_test,
)
from bnserve.trainer.stats.information import (
    GAIN_FLOOR,
    conditional_information_metrics,
    conditional_mutual_information,
    conditional_mutual_information_from_counts,
    dependence_derivative_information_from_counts,
    entropy,
    mutual_information,
    mutual_information_from_counts,
    row_entropies,
    xlogx,
)
from bnserve.trainer.stats.pairs import (
    PAIR_TABLE_CELLS,
    TABLE_ROWS_PER_CELL,
    ColumnGroups,
    PairStatistics,
    class_mutual_information,
    conditional_mutual_information_matrix,
    dependence_derivative_information_matrix,
    pairwise_class_counts,
)
from bnserve.trainer.stats.scores import bic_penalty, cooper_herskovits_from_counts, family_log_likelihood

__all__ = [
    "ALPHA",
    "COMPARED_VALUES",
    "GAIN_FLOOR",
    "MIN_EXPECTED_PER_CELL",
    "PAIR_TABLE_CELLS",
    "TABLE_ROWS_PER_CELL",
    "TRANSPOSE_ROWS",
    "ColumnGroups",
    "IndependenceTest",
    "PairStatistics",
    "bic_penalty",
    "class_mutual_information",
    "conditional_g_test",
    "conditional_independence_test",
    "conditional_information_metrics",
    "conditional_mutual_information",
    "conditional_mutual_information_from_counts",
    "conditional_mutual_information_matrix",
    "cooper_herskovits_from_counts",
    "dependence_derivative_information_from_counts",
    "dependence_derivative_information_matrix",
    "entropy",
    "family_log_likelihood",
    "feature_columns",
    "functional_dependency_matrix",
    "independence_given_test",
    "independence_test",
    "joint_code",
    "joint_column",
    "joint_counts",
    "mutual_information",
    "mutual_information_from_counts",
    "occurring_instantiations",
    "pairwise_class_counts",
    "row_entropies",
    "shifted_codes",
    "value_counts",
    "xlogx",
]
