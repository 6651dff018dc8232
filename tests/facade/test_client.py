"""bnserve.Client against the real server on a real port: the three forms of rows give the
estimator's own probabilities; batches, metadata and the model list; TLS and the bearer
token; retries after UNAVAILABLE; errors as the server sent them. And publish/load between
a notebook and the store (SQLite and PostgreSQL), served by the server."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import grpc
import numpy as np
import pandas as pd
import pytest

import bnserve.server.client
from bnserve import BayesNetClassifier, Client, load, load_model, publish
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.store.db import ModelStore
from tests.certificates import make_pki
from tests.e2e.serving import free_port
from tests.in_process_server import running_app

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="module")
def fitted() -> tuple[BayesNetClassifier, pd.DataFrame]:
    frame = pd.read_csv(DATA / "hepatitis.csv.gz")
    X, y = frame.drop(columns="class"), frame["class"]
    return BayesNetClassifier("tan").fit(X, y), X


@pytest.fixture(scope="module")
def server(fitted, tmp_path_factory):
    clf, _ = fitted
    with running_app(tmp_path_factory.mktemp("store"), {"hepatitis": clf.model_}) as app:
        yield app


def test_dicts_frames_and_codes_give_the_estimators_probabilities(server, fitted):
    clf, X = fitted
    expected = clf.predict_proba(X)
    with Client(f"127.0.0.1:{server.port}") as client:
        by_frame = client.predict("hepatitis", X)
        by_dicts = client.predict("hepatitis", X.to_dict(orient="records"))
        by_codes = client.predict("hepatitis", clf._codes(X))
    for answer in (by_frame, by_dicts, by_codes):
        assert (answer.model, answer.version, answer.classes) == ("hepatitis", 1, ("DIE", "LIVE"))
        np.testing.assert_allclose(answer.probabilities, expected, rtol=0, atol=1e-12)
        assert answer.labels.tolist() == clf.predict(X).tolist()
    frame = by_frame.to_frame()
    assert list(frame.columns) == ["label", "DIE", "LIVE"] and len(frame) == len(X)


def test_rows_go_in_batches_of_batch_rows(server, fitted):
    clf, X = fitted
    with Client(f"127.0.0.1:{server.port}", batch_rows=7) as client:
        answer = client.predict("hepatitis", X.head(30))
        single = client.predict("hepatitis", [{}])  # every feature missing: the class prior
    np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(30)), rtol=0, atol=1e-12)
    assert single.probabilities.shape == (1, 2)


@pytest.mark.parametrize("form", ["frame", "codes"])
def test_a_batch_larger_than_batch_bytes_is_split_in_order(server, fitted, form):
    clf, X = fitted
    rows = X.head(30) if form == "frame" else clf._codes(X.head(30))
    with Client(f"127.0.0.1:{server.port}", batch_rows=20, batch_bytes=300) as client:
        sent = _recording_predicts(client, sizes_of=lambda request: (_rows(request), request.ByteSize()))
        answer = client.predict("hepatitis", rows)
    assert sum(n for n, _ in sent) == 30 and len(sent) > 2
    assert all(n == 1 or size <= 300 + 64 for n, size in sent), sent  # + the model's name, set once split
    np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(30)), rtol=0, atol=1e-12)


def test_a_batch_the_servers_defaults_would_refuse_is_sent_in_parts(server, fitted):
    """40,000 rows as one 19 MB batch: charged 24 times its size, past the default
    --max-connection-inflight-bytes (192 MiB), the server refuses it before parsing; split
    by the default batch_bytes, every part is admitted."""
    clf, X = fitted
    rows = pd.concat([X] * (40_000 // len(X) + 1)).head(40_000)
    with Client(f"127.0.0.1:{server.port}", batch_rows=40_000, batch_bytes=10**9, timeout=120) as client:
        with pytest.raises(grpc.RpcError) as refused:
            client.predict("hepatitis", rows)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with Client(f"127.0.0.1:{server.port}", batch_rows=40_000, timeout=120) as client:
        answer = client.predict("hepatitis", rows)
    np.testing.assert_allclose(answer.probabilities, clf.predict_proba(rows), rtol=0, atol=1e-12)


def test_the_class_column_and_other_columns_are_left_out_unless_asked_to_refuse(server, fitted):
    clf, X = fitted
    whole = X.assign(**{"class": "LIVE", "row id": range(len(X))})  # a training frame, plus an id
    with Client(f"127.0.0.1:{server.port}") as client:
        by_frame = client.predict("hepatitis", whole)
        by_dicts = client.predict("hepatitis", whole.to_dict(orient="records"))
        with pytest.raises(grpc.RpcError) as strict:
            client.predict("hepatitis", whole, extra_columns="error")
        with pytest.raises(ValueError, match="extra_columns must be one of ignore, error, got 'drop'"):
            client.predict("hepatitis", X, extra_columns="drop")
    for answer in (by_frame, by_dicts):
        np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X), rtol=0, atol=1e-12)
    assert strict.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert strict.value.details() == "'class' is the class variable; send features only"


def _rows(request) -> int:
    return len(request.instances) or len(request.dense.codes) // len(request.dense.features)


def _recording_predicts(client: Client, after_first=lambda: None, sizes_of=_rows) -> list[int]:
    """The rows (or another ``sizes_of``) of each Predict the client sends (to the real
    server); ``after_first`` runs once the first has been answered."""
    sizes: list[int] = []
    real = client._methods["Predict"]

    def predict(request, **kwargs):
        reply = real(request, **kwargs)
        sizes.append(sizes_of(request))
        if len(sizes) == 1:
            after_first()
        return reply

    client._methods["Predict"] = predict
    return sizes


@pytest.mark.parametrize("form", ["frame", "codes"])
def test_rows_are_sent_in_requests_of_batch_rows(server, fitted, form):
    clf, X = fitted
    rows = X.head(30) if form == "frame" else clf._codes(X.head(30))
    with Client(f"127.0.0.1:{server.port}", batch_rows=7) as client:
        sizes = _recording_predicts(client)
        answer = client.predict("hepatitis", rows)
    assert sizes == [7, 7, 7, 7, 2]
    np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(30)), rtol=0, atol=1e-12)


@pytest.mark.parametrize("form", ["frame", "codes", "strict dicts"])
def test_rows_per_request_are_fewer_for_a_model_of_many_features(server, fitted, form):
    """batch_cells bounds rows × features: 100 cells of hepatitis's 19 features are 5 rows a
    request; with extra_columns="error" the client knows only what each row sends."""
    clf, X = fitted
    rows = {"frame": X.head(30), "codes": clf._codes(X.head(30)), "strict dicts": [{"SEX": "male"}] * 30}[form]
    extra = "error" if form == "strict dicts" else "ignore"
    with Client(f"127.0.0.1:{server.port}", batch_rows=20, batch_cells=100) as client:
        sizes = _recording_predicts(client)
        answer = client.predict("hepatitis", rows, extra_columns=extra)
    assert sizes == ([20, 10] if form == "strict dicts" else [5] * 6)  # one value a row: 100 rows allowed
    assert answer.probabilities.shape == (30, 2)


def test_a_wide_models_rows_go_in_requests_of_at_most_batch_cells(tmp_path):
    """A model of 800 features: 10,000 rows that each send one value decode to 8 million
    cells on the server; the client's default batch_cells sends them 1,250 rows at a time,
    the answer the estimator's."""
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.choice(["a", "b"], size=(60, 800)), columns=[f"f{j}" for j in range(800)])
    clf = BayesNetClassifier("nb").fit(X, rng.choice(["yes", "no"], 60))
    rows = [{"f0": "a"}] * 10_000
    with running_app(tmp_path, {"wide": clf.model_}) as app, Client(f"127.0.0.1:{app.port}", timeout=120) as client:
        sizes = _recording_predicts(client)
        answer = client.predict("wide", rows)
    assert sizes == [1_250] * 8
    one = clf.predict_proba(pd.DataFrame([{"f0": "a"}]).reindex(columns=X.columns))  # the others missing
    np.testing.assert_allclose(answer.probabilities, np.repeat(one, len(rows), axis=0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("extra_columns", ["ignore", "error"])
def test_later_batches_go_to_the_first_batchs_version_when_the_alias_moves(fitted, tmp_path, extra_columns):
    clf, X = fitted
    other = BayesNetClassifier("nb").fit(X, clf.classes_[np.zeros(len(X), dtype=int) + (X.index % 2)])
    with running_app(tmp_path, {"hepatitis": [clf.model_, other.model_]}) as app:
        with ModelStore(app.config.store_url) as store:
            store.set_alias("hepatitis", "production", 1)
        app.repository.refresh()

        def move_alias():
            with ModelStore(app.config.store_url) as store:
                store.set_alias("hepatitis", "production", 2)
            app.repository.refresh()

        with Client(f"127.0.0.1:{app.port}", batch_rows=7) as client:
            sizes = _recording_predicts(client, after_first=move_alias)
            answer = client.predict("hepatitis", X.head(30), alias="production", extra_columns=extra_columns)
            moved = client.predict("hepatitis", X.head(30), alias="production")
    assert sizes[:5] == [7, 7, 7, 7, 2] and answer.version == 1 and moved.version == 2
    np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(30)), rtol=0, atol=1e-12)
    assert not np.allclose(moved.probabilities, answer.probabilities)


def test_metadata_and_the_model_list(server, fitted):
    clf, _ = fitted
    with Client(f"127.0.0.1:{server.port}") as client:
        models = client.list_models()
        meta = client.metadata("hepatitis", version=1, include_parameters=True)
    assert [(m.name, m.versions, m.latest_version) for m in models] == [("hepatitis", (1,), 1)]
    assert meta["features"] == [v.name for v in clf.model_.features]
    assert meta["classes"] == ["DIE", "LIVE"] and meta["algorithm"] == "tan"
    assert len(meta["cpts"]) == len(clf.model_.variables)


def test_errors_come_as_the_server_sent_them(server):
    with Client(f"127.0.0.1:{server.port}") as client:
        with pytest.raises(grpc.RpcError) as missing:
            client.predict("no-such-model", [{}])
        with pytest.raises(grpc.RpcError) as bad:
            client.predict("hepatitis", [{"SEX": "unknown"}], unknown="error")
        unseen = client.predict("hepatitis", [{"SEX": "unknown"}])
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "'unknown'" in bad.value.details()
    assert unseen.probabilities.shape == (1, 2)


def test_tls_and_the_bearer_token(fitted, tmp_path):
    clf, X = fitted
    pki = make_pki(tmp_path / "pki")
    tokens = tmp_path / "tokens"
    tokens.write_text("s3cret-token\n")
    with running_app(
        tmp_path,
        {"hepatitis": clf.model_},
        tls_cert=str(pki.server.cert),
        tls_key=str(pki.server.key),
        tls_client_ca=str(pki.ca.cert),
        auth_token_file=str(tokens),
    ) as app:
        target = f"localhost:{app.port}"
        with Client(
            target,
            root_certificates=str(pki.ca.cert),
            certificate_chain=str(pki.client.cert),
            private_key=str(pki.client.key),
            token="s3cret-token",
        ) as client:
            answer = client.predict("hepatitis", X.head(3))
        np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(3)), rtol=0, atol=1e-12)
        with (
            Client(
                target,
                root_certificates=pki.ca.cert.read_bytes(),
                certificate_chain=str(pki.client.cert),
                private_key=str(pki.client.key),
            ) as client,
            pytest.raises(grpc.RpcError) as no_token,
        ):
            client.list_models()
        assert no_token.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(ValueError, match="together"):
        Client(target, certificate_chain=str(pki.client.cert))


def test_unavailable_is_tried_again_until_the_server_is_up(fitted, tmp_path, monkeypatch):
    """The server starts only once the client's first attempt has failed (its first backoff
    pause): with retries the call waits for it; without, it fails."""
    clf, X = fitted
    url = f"sqlite:///{tmp_path / 'store.db'}"
    with ModelStore(url, create=True) as store:
        store.publish("hepatitis", clf.model_)
    port = free_port()
    with Client(f"127.0.0.1:{port}", retries=0, timeout=5) as client, pytest.raises(grpc.RpcError) as down:
        client.list_models()
    assert down.value.code() == grpc.StatusCode.UNAVAILABLE
    started = threading.Event()
    apps: list[App] = []

    def start_later() -> None:
        started.wait()
        apps.append(App(ServeConfig(store_url=url, host="127.0.0.1", port=port, metrics_port=-1)).start())

    class Clock:  # the client's clock; its first pause (after a failed attempt) starts the server
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds: float) -> None:
            started.set()
            time.sleep(seconds)

    monkeypatch.setattr(bnserve.server.client, "time", Clock)
    thread = threading.Thread(target=start_later)
    thread.start()
    try:
        with Client(f"127.0.0.1:{port}", retries=30, timeout=60) as client:
            answer = client.predict("hepatitis", X.head(2))
        assert started.is_set()
        np.testing.assert_allclose(answer.probabilities, clf.predict_proba(X.head(2)), rtol=0, atol=1e-12)
    finally:
        started.set()
        thread.join()
        for app in apps:
            app.stop()


def test_publish_and_load_between_notebook_store_and_server(fitted, empty_url, tmp_path):
    clf, X = fitted
    codes = BayesNetClassifier("nb").fit(X, pd.read_csv(DATA / "hepatitis.csv.gz")["class"].map({"DIE": 0, "LIVE": 1}))
    assert publish(clf, "hepatitis", ["production"], store=empty_url) == 1
    assert (
        publish(
            codes, "hepatitis", ["staging"], store=empty_url, description="integer labels", tags={"owner": "ds-team"}
        )
        == 2
    )
    with ModelStore(empty_url) as store:
        (second,) = [v for v in store.list_versions("hepatitis") if v.version == 2]
    assert (second.description, dict(second.tags)) == ("integer labels", {"owner": "ds-team"})
    production = load("hepatitis", store=empty_url)  # no selector: the production alias
    np.testing.assert_array_equal(production.predict_proba(X), clf.predict_proba(X))
    assert production.classes_.tolist() == ["DIE", "LIVE"]
    staging = load("hepatitis@staging", store=empty_url)
    assert staging.classes_.tolist() == [0, 1] and set(staging.predict(X).tolist()) <= {0, 1}
    np.testing.assert_array_equal(staging.predict_proba(X), codes.predict_proba(X))
    assert load_model("hepatitis:2", store=empty_url).checksum() == codes.model_.checksum()
    with pytest.raises(Exception, match="no alias 'canary'"):
        load("hepatitis@canary", store=empty_url)
    with pytest.raises(Exception, match="invalid"):
        publish(clf, "bad name", store=empty_url)
    with pytest.raises(Exception, match="tag key .bad key!. is invalid"):
        publish(clf, "hepatitis", store=empty_url, tags={"bad key!": "x"})


def test_an_integer_coded_nominal_column_read_by_pandas_as_numbers_is_sent_as_its_labels(tmp_path):
    """A frame whose nominal column holds integer codes (pandas reads it as int, or as float
    beside a missing value) is answered as the estimator answers it, not refused as numbers."""
    rng = np.random.default_rng(3)
    X = pd.DataFrame({"region": rng.integers(1, 9, 300), "home": rng.choice(["own", "rent"], 300)})
    y = np.where((X["region"] > 4) ^ (X["home"] == "own"), "bad", "good")
    clf = BayesNetClassifier("nb").fit(X.astype({"region": str}), y)
    assert clf.model_.features[0].kind != "numeric"
    floats = X.astype({"region": float})
    floats.loc[0, "region"] = np.nan
    with running_app(tmp_path, {"credit": clf.model_}) as app, Client(f"127.0.0.1:{app.port}") as client:
        as_ints = client.predict("credit", X)
        as_floats = client.predict("credit", floats)
    expected = clf.predict_proba(X.astype({"region": str}))
    np.testing.assert_allclose(as_ints.probabilities, expected, rtol=0, atol=1e-12)
    expected[0] = clf.predict_proba(floats.head(1).astype({"region": object}).assign(region=[None]))[0]
    np.testing.assert_allclose(as_floats.probabilities, expected, rtol=0, atol=1e-12)
