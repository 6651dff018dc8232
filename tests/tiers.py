"""The two tiers of the suite (issue 29): the default set, which the README's test command
runs (``pytest`` alone: pyproject.toml's ``-m "not slow"``), and the rest, marked ``slow``,
which ``.ci/run`` runs after it (``pytest -m slow``).

The rule, in this one place: a test is ``slow`` when its file is in ``SLOW_FILES`` or its
name (``file::function``, every parametrisation) is in ``SLOW_TESTS``. From a
``--durations=0`` run of the whole suite on the shared 2-core CI machine (26.5 min): whole
files that are slow by nature (every end-to-end file but ``test_quick_start.py``, which
stays as the default set's real path: train, publish to a store, a real server, Predict;
the serving benches and the load test; clusters, fuzzing, kills, the wheel, a real
Prometheus), and elsewhere each function whose parametrisations summed 2 s or more. The
default set then summed about 3 minutes there and still covers every package (the facade,
store, trainer, server, deploy). A listed name that matches no test fails the run, so the
lists cannot go stale.
"""

from __future__ import annotations

from collections.abc import Iterable

SLOW = "slow"

# Slow by nature: real servers and clusters, load, faults, end-to-end runs (all but the one kept).
SLOW_FILES: frozenset[str] = frozenset(
    {
        "tests/bench/test_load.py",
        "tests/bench/test_serving_benches.py",
        "tests/deploy/test_prometheus.py",
        "tests/e2e/test_alias_under_load.py",
        "tests/e2e/test_drain_under_load.py",
        "tests/e2e/test_every_learner.py",
        "tests/e2e/test_forged_versions.py",
        "tests/e2e/test_isolated_refusals.py",
        "tests/e2e/test_loop_never_stops.py",
        "tests/e2e/test_memory_budget.py",
        "tests/e2e/test_missing_patterns_memory.py",
        "tests/e2e/test_missing_state_served.py",
        "tests/e2e/test_new_user_files.py",
        "tests/e2e/test_numeric_serve.py",
        "tests/e2e/test_refused_versions.py",
        "tests/e2e/test_security.py",
        "tests/e2e/test_store_loads_isolated.py",
        "tests/e2e/test_store_outage.py",
        "tests/e2e/test_store_secrets.py",
        "tests/e2e/test_store_timeouts.py",
        "tests/e2e/test_train_serve.py",
        "tests/e2e/test_unseen_values.py",
        "tests/e2e/test_workers.py",
        "tests/server/test_fuzz.py",
        "tests/store/test_kill_publish.py",
        "tests/test_packaging.py",
        "tests/trainer/test_dask.py",
        "tests/trainer/test_other_tools.py",
        "tests/trainer/test_wrapper_models_unchanged.py",
    }
)

# Elsewhere, every test function whose parametrisations took 2 s or more in all.
SLOW_TESTS: frozenset[str] = frozenset(
    {
        "tests/deploy/test_kubernetes.py::test_kustomize_renders_valid_documents_in_the_namespace",
        "tests/deploy/test_kubernetes.py::test_the_manifests_commands_run_a_cluster_that_trains",
        "tests/deploy/test_kubernetes.py::test_training_command_parses_with_the_trainers_parser",
        "tests/deploy/test_secure_by_default.py::test_dask_speaks_only_tls_with_the_certificate_of_a_secret",
        "tests/deploy/test_secure_by_default.py::test_the_example_postgres_makes_a_role_that_may_only_read",
        "tests/deploy/test_secure_by_default.py::test_the_server_as_configured_wants_tls_and_a_token_and_its_probes_pass",
        "tests/facade/test_client.py::test_a_batch_the_servers_defaults_would_refuse_is_sent_in_parts",
        "tests/facade/test_client_hostile.py::test_a_gzip_bomb_under_the_limit_does_not_balloon_the_client",
        "tests/facade/test_estimator.py::test_scikit_learn_estimator_checks_pass",
        "tests/facade/test_training_plan.py::test_the_estimator_learns_the_model_trainer_fit_learns",
        "tests/server/test_client_cli.py::test_health_exits_0_only_when_serving",
        "tests/server/test_requests.py::test_columns_through_the_tables_equal_coding_each_column",
        "tests/server/test_requests.py::test_instances_through_the_tables_equal_coding_each_value",
        "tests/server/test_responses.py::test_written_responses_equal_the_field_by_field_build",
        "tests/server/test_security.py::test_a_changed_token_file_is_read_again",
        "tests/store/test_aliases.py::test_not_found_names_what_is_missing",
        "tests/store/test_catalogue_changes.py::test_each_write_is_read_and_only_its_model",
        "tests/store/test_inference.py::test_compiling_a_wide_network_builds_nothing_quadratic",
        "tests/store/test_lifecycle.py::test_an_old_store_is_refused_then_upgraded_without_losing_anything",
        "tests/store/test_lifecycle.py::test_bad_description_or_tags_are_refused_and_nothing_is_written",
        "tests/store/test_signing.py::test_a_version_altered_in_the_store_is_refused_by_a_reader_with_the_key",
        "tests/store/test_timeouts.py::test_a_connection_that_gets_no_answer_gives_up_and_closes",
        "tests/store/test_timeouts.py::test_a_partitioned_store_fails_each_call_and_recovers_after",
        "tests/store/test_timeouts.py::test_opening_a_partitioned_store_fails_within_the_connect_timeout",
        "tests/store/test_unseen_values.py::test_an_unseen_value_has_the_posterior_of_a_missing_one",
        "tests/test_startup_imports.py::test_fit_nb_and_predict_with_a_current_store_import_only_what_they_use",
        "tests/test_tiers.py::test_the_default_set_covers_every_package_and_an_end_to_end_path_and_leaves_the_rest",
        "tests/trainer/test_auto.py::test_alr_is_tried_on_the_better_of_naive_bayes_and_tan_only",
        "tests/trainer/test_auto_binning.py::test_evaluate_on_a_test_file_codes_it_as_auto_cut_its_training_file",
        "tests/trainer/test_auto_binning.py::test_nested_cv_scores_the_test_rows_as_the_chosen_method_cuts_them",
        "tests/trainer/test_auto_binning.py::test_the_choice_is_recorded_and_the_recorded_command_makes_the_same_model",
        "tests/trainer/test_cli.py::test_evaluate_auto_by_nested_cross_validation",
        "tests/trainer/test_cli.py::test_evaluate_gives_k_to_the_learners_that_take_it",
        "tests/trainer/test_cli.py::test_precision_flag_records_the_table_dtype_and_the_check_behind_it",
        "tests/trainer/test_cli_limits.py::test_auto_notes_its_skips_on_stderr_and_quiet_silences_them",
        "tests/trainer/test_cli_limits.py::test_evaluate_auto_honours_max_cpt_cells_and_quiet",
        "tests/trainer/test_cli_secrets.py::test_fit_on_a_url_that_fails_shows_no_secret",
        "tests/trainer/test_cli_terminal.py::test_a_description_keeps_its_newlines_and_tabs",
        "tests/trainer/test_cli_terminal.py::test_publishing_a_control_character_is_refused_naming_it",
        "tests/trainer/test_cli_terminal.py::test_show_and_list_print_no_raw_control_character",
        "tests/trainer/test_discretize.py::test_a_pkid_model_serves_its_cut_points_from_the_store",
        "tests/trainer/test_ensembles.py::test_chess_accuracy_aode_beats_nb_and_rtan_matches_tan",
        "tests/trainer/test_plan.py::test_auto_without_a_time_limit_chooses_the_same_model_every_run",
        "tests/trainer/test_predict_out.py::test_a_signal_mid_way_removes_the_partial_file",
        "tests/trainer/test_predict_out.py::test_the_input_is_never_the_output",
        "tests/trainer/test_progress.py::test_evaluate_shows_its_folds_on_a_terminal_and_quiet_silences_them",
        "tests/trainer/test_readers.py::test_every_shared_data_set_reads_the_same_in_chunks",
        "tests/trainer/test_readers.py::test_every_shared_data_set_reads_the_same_with_both_parsers",
        "tests/trainer/test_streaming.py::test_a_parquet_file_streamed_equals_it_in_memory",
        "tests/trainer/test_streaming.py::test_a_streamed_fit_equals_the_in_memory_fit",
        "tests/trainer/test_streaming.py::test_parts_counted_by_processes_give_the_same_model",
        "tests/trainer/test_streaming.py::test_the_later_passes_read_the_chunks_pass_1_kept_not_the_file",
        "tests/trainer/test_tan_ddr.py::test_dermatology_matches_zhang_table_2",
        "tests/trainer/test_training_memory.py::test_auto_skips_what_does_not_fit_a_line_each_and_publishes_within_a_gib",
        "tests/trainer/test_weights.py::test_weights_read_in_chunks_give_the_in_memory_model",
        "tests/trainer/test_weights.py::test_whole_number_weights_equal_repeated_rows",
    }
)


def is_slow(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (``tests/x.py::test_y[param]``) is in the rest."""
    path, _, name = nodeid.partition("::")
    return path in SLOW_FILES or f"{path}::{name.split('[')[0]}" in SLOW_TESTS


def unmatched(nodeids: Iterable[str]) -> list[str]:
    """The listed files and names that none of ``nodeids`` (a whole collection) matches."""
    names = {n.split("[")[0] for n in nodeids}
    seen = names | {n.partition("::")[0] for n in names}
    return sorted((SLOW_FILES | SLOW_TESTS) - seen)
