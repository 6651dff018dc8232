"""Sufficient statistics, in one place, for every learner: counts (``counts``), information
measures (``information``), the pairwise tables and matrices (``pairs``), tests of
independence (``independence``), functional dependencies (``dependencies``) and family
scores (``scores``). Columns are integer codes, -1 = missing; counts are available-case;
information is in nats."""

from bnserve.trainer.stats.counts import joint_counts, shifted_codes, TRANSPOSE_ROWS, feature_columns, joint_column, occurring_instantiations
from bnserve.trainer.stats.information import entropy, row_entropies, mutual_information_from_counts, conditional_mutual_information_from_counts, mutual_information, conditional_mutual_information, dependence_derivative_information_from_counts, GAIN_FLOOR, xlogx, conditional_information_metrics
from bnserve.trainer.stats.pairs import class_mutual_information, conditional_mutual_information_matrix, dependence_derivative_information_matrix, PairStatistics, PAIR_TABLE_CELLS, TABLE_ROWS_PER_CELL, ROW_CHUNK, pairwise_class_counts, ColumnGroups
from bnserve.trainer.stats.independence import MIN_EXPECTED_PER_CELL, ALPHA, IndependenceTest, independence_test, conditional_independence_test
from bnserve.trainer.stats.dependencies import functional_dependency_matrix
from bnserve.trainer.stats.scores import cooper_herskovits_from_counts, family_log_likelihood, bic_penalty

__all__ = [
    "ALPHA",
    "ColumnGroups",
    "GAIN_FLOOR",
    "IndependenceTest",
    "MIN_EXPECTED_PER_CELL",
    "PAIR_TABLE_CELLS",
    "PairStatistics",
    "ROW_CHUNK",
    "TABLE_ROWS_PER_CELL",
    "TRANSPOSE_ROWS",
    "bic_penalty",
    "class_mutual_information",
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
    "independence_test",
    "joint_column",
    "joint_counts",
    "mutual_information",
    "mutual_information_from_counts",
    "occurring_instantiations",
    "pairwise_class_counts",
    "row_entropies",
    "shifted_codes",
    "xlogx",
]
