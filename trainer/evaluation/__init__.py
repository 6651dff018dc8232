"""Scoring learners: stratified cross-validation and hold-out through the same compiled
predictor the server uses (``cross_validation``), the scores of predictions and structures
(``metrics``), the papers' comparisons across algorithms and data sets (``comparison``) and
their plain-text report (``report``)."""
