"""The search engines the learners share: greedy hill climbing (``greedy``), maximum-weight
spanning trees and forests (``spanning``), groups of features as a DAG and the augmenting
forest (``groups``), K2 and CB (``k2``, ``cb``), and the cross-validated accuracy the
wrapper learners search with (``wrapper``)."""
