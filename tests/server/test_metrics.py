"""Metrics live in the registry they are made against: the global one for /metrics, a test's own otherwise."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from bnserve.server.metrics import METRICS, Metrics
from bnserve.server.repository import ModelRepository
from bnserve.store.predictor.compiled import TABLE_PRECISION
from tests.model_factory import random_model


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_two_repositories_with_registries_of_their_own_do_not_see_each_others_counts(model_store, rng):
    for _ in range(2):
        model_store.publish("m", random_model(rng, n_features=2))
    watched = ("bnserve_prediction_rows_total", "bnserve_model_load_failures_total", "bnserve_version_loads_total")
    global_before = generate_latest(REGISTRY).decode()
    one, two = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    first, second = ModelRepository(model_store, metrics=one), ModelRepository(model_store, metrics=two)
    first.refresh()
    second.refresh()

    first.get("m")[0].metrics.record(np.array([0, 1, 1]), time.perf_counter())
    second.get("m")[0].metrics.record(np.array([1]), time.perf_counter())
    first.get("m", version=1)  # a load on demand, in the first alone
    model = random_model(rng, n_features=2)
    float16 = {**model.metadata, TABLE_PRECISION: {"dtype": "float16"}}
    model_store.publish("m", dataclasses.replace(model, metadata=float16).validate())
    first.refresh()  # the first alone refuses version 3

    assert _value(one.registry, "bnserve_prediction_rows_total", model="m") == 3
    assert _value(two.registry, "bnserve_prediction_rows_total", model="m") == 1
    second_class = first.get("m")[0].model.class_variable.states[1]
    assert _value(one.registry, "bnserve_predicted_class_rows_total", model="m", **{"class": second_class}) == 2
    assert _value(one.registry, "bnserve_version_loads_total", result="loaded") == 1
    assert _value(two.registry, "bnserve_version_loads_total", result="loaded") == 0
    assert _value(one.registry, "bnserve_model_load_failures_total", model="m") == 1
    assert _value(two.registry, "bnserve_model_load_failures_total", model="m") == 0
    algorithm = first.entry("m").loaded[2].model.algorithm
    for metrics in (one, two):
        assert (
            _value(metrics.registry, "bnserve_model_info", model="m", version="2", algorithm=algorithm, aliases="") == 1
        )
    after = generate_latest(REGISTRY).decode()
    for name in watched:  # nothing of theirs reached the global registry
        assert [line for line in global_before.splitlines() if line.startswith(name)] == [
            line for line in after.splitlines() if line.startswith(name)
        ]
    first.close()
    second.close()


def test_the_global_registry_holds_every_metric_the_operations_page_lists():
    """The default ``Metrics`` is the one /metrics serves, with the documented names."""
    assert METRICS.registry is REGISTRY
    names = {m.name for m in REGISTRY.collect()}
    documented = {
        "grpc_server_started",
        "grpc_server_handled",
        "grpc_server_handling_seconds",
        "bnserve_prediction_rows",
        "bnserve_predicted_class_rows",
        "bnserve_unknown_values",
        "bnserve_request_rows",
        "bnserve_request_seconds",
        "bnserve_model_info",
        "bnserve_model_load_seconds",
        "bnserve_model_load_failures",
        "bnserve_version_loads",
        "bnserve_version_calls_shed",
        "bnserve_version_load_waiters",
        "bnserve_version_cache_bytes",
        "bnserve_store_poll_errors",
        "bnserve_store_poll_stalls",
        "bnserve_inflight_request_bytes",
        "bnserve_plan_cache_bytes",
        "bnserve_store_last_success_timestamp_seconds",
    }
    assert documented <= names
