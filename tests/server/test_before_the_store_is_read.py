"""A server listens at once and reads its store in the background; until that first read it
knows no model, so every call that names or lists models is UNAVAILABLE, which clients
retry, never NOT_FOUND, which they do not (a client that retried through a start under load
was told 'model not found'). Once the store is read the same calls answer. Checked on the
data plane the servicers call, with a repository before and after its first read (holding
a real server's first read back depends on the database's locking, not on us)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import grpc
import numpy as np
import pytest

from bnserve.server.dataplane import DataPlane
from bnserve.server.interceptors import status_of
from bnserve.server.repository import ModelRepository
from bnserve.store.db import ModelStore
from bnserve.store.errors import StoreUnavailable
from tests.model_factory import random_model


def test_calls_before_the_first_read_are_unavailable_then_answered(tmp_path):
    with ModelStore(f"sqlite:///{tmp_path / 'store.db'}", create=True) as store:
        store.publish("m", random_model(np.random.default_rng(0), n_features=2))
        repository = ModelRepository(store)
        with ThreadPoolExecutor(1) as pool:
            plane = DataPlane(repository, max_rows=10, ready=lambda: True, pool=pool)
            for call in (plane.models, lambda: asyncio.run(plane.model("m")), lambda: asyncio.run(plane.model("x"))):
                with pytest.raises(StoreUnavailable) as refused:
                    call()
                assert status_of(refused.value) == grpc.StatusCode.UNAVAILABLE
            repository.refresh()
            assert list(plane.models().models) == ["m"]
            served, _ = asyncio.run(plane.model("m"))
            assert served.version == 1
        repository.close()
