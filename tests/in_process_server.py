"""The real server in the test process, on a free loopback port, over a SQLite store file.

Import as ``from tests.in_process_server import running_app``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bnserve.server.app import App
from bnserve.server.config import ServeConfig
from bnserve.store.db import ModelStore
from bnserve.store.model import Model


@contextmanager
def running_app(
    directory: Path, models: Mapping[str, Model | Sequence[Model]] = {}, ready_seconds: float = 30, **config: Any
) -> Iterator[App]:
    """Publish ``models`` (name -> model, or its versions in order) into a store in
    ``directory``, start the server on it, wait until it has read the store, and stop it after.
    ``config``: further ServeConfig fields (e.g. tls_cert, auth_token_file, metrics_port)."""
    url = f"sqlite:///{directory / 'store.db'}"
    with ModelStore(url, create=True) as store:
        for name, versions in models.items():
            for model in versions if isinstance(versions, (list, tuple)) else [versions]:
                store.publish(name, model)
    settings = dict(host="127.0.0.1", port=0, metrics_port=-1, poll_seconds=60) | config
    app = App(ServeConfig(store_url=url, **settings)).start()
    try:
        assert app.repository.wait_ready(ready_seconds)
        yield app
    finally:
        app.stop()
