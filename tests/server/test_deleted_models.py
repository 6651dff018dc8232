"""Issue 15: a version or model deleted from the store (`trainer delete`) is answered
NOT_FOUND by a running server after its next poll, as one never published, on both backends."""

from __future__ import annotations

import grpc

from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from tests.model_factory import random_model


def _code(call) -> grpc.StatusCode:
    try:
        call()
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_predict_for_a_deleted_version_or_model_is_not_found_after_the_next_poll(model_store, store_url, rng):
    for _ in range(3):
        model_store.publish("m", random_model(rng, n_features=2))
    model_store.set_alias("m", "staging", 2)
    app = App(ServeConfig(store_url=store_url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=3600)).start()
    try:
        assert app.repository.wait_ready(30)
        with grpc.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = predictor_pb2_grpc.PredictorStub(channel)

            def predict(**selector):
                return lambda: stub.Predict(pb.PredictRequest(model="m", instances=[pb.Instance()], **selector))

            assert stub.Predict(pb.PredictRequest(model="m", version=1)).version == 1
            assert predict(alias="staging")().version == 2

            model_store.delete("m", 1)
            model_store.delete("m", 2, force=True)
            assert app.poller.poll_once()

            assert _code(predict(version=1)) == grpc.StatusCode.NOT_FOUND
            assert _code(predict(version=2)) == grpc.StatusCode.NOT_FOUND
            assert _code(predict(alias="staging")) == grpc.StatusCode.NOT_FOUND
            assert predict()().version == 3

            model_store.delete("m")
            assert app.poller.poll_once()
            assert _code(predict()) == grpc.StatusCode.NOT_FOUND
            meta = lambda: stub.GetModelMetadata(pb.GetModelMetadataRequest(model="m"))  # noqa: E731
            assert _code(meta) == grpc.StatusCode.NOT_FOUND
            assert [m.name for m in stub.ListModels(pb.ListModelsRequest()).models] == []
    finally:
        app.stop()


def test_the_server_logs_each_version_it_drops_and_each_alias_that_moves(model_store, store_url, rng, caplog):
    for _ in range(3):
        model_store.publish("m", random_model(rng, n_features=2))
    model_store.set_alias("m", "production", 1)
    app = App(ServeConfig(store_url=store_url, host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=3600)).start()
    try:
        assert app.repository.wait_ready(30)

        def lines_of_a_refresh() -> list[str]:
            caplog.clear()
            with caplog.at_level("INFO", logger="bnserve.server.repository"):
                app.repository.refresh()
            return [
                r.getMessage()
                for r in caplog.records
                if r.levelname == "INFO" and not r.getMessage().startswith("loaded")
            ]

        model_store.set_alias("m", "production", 3)
        model_store.set_alias("m", "staging", 2)
        model_store.delete("m", 1)
        assert lines_of_a_refresh() == [
            "dropped m version 1: deleted from the store",
            "alias production of m moved from version 1 to version 3",
            "alias staging of m set to version 2",
        ]
        model_store.remove_alias("m", "staging")
        assert lines_of_a_refresh() == ["alias staging of m removed (it named version 2)"]
        model_store.delete("m", force=True)
        assert lines_of_a_refresh() == [
            "dropped m version 2: deleted from the store",
            "dropped m version 3: deleted from the store",
            "alias production of m removed (it named version 3)",
        ]
        assert lines_of_a_refresh() == []  # nothing changed, nothing said
    finally:
        app.stop()
