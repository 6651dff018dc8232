"""A publisher to SIGKILL: ``python tests/store/publish_child.py URL NAME SEED N_FEATURES``.

Builds ``random_model(default_rng(SEED), n_features=N_FEATURES)``, opens the store, says
``ready`` and waits for a line ``go`` on stdin (so a test can start the next one while the
last runs), then publishes the model once with the alias ``production``, printing
(unbuffered) where it is: ``start`` just before ``publish``, ``writing`` as its first INSERT goes to the database,
``committing`` as its transaction commits, and ``done VERSION`` once ``publish`` returned.
``tests/store/test_kill_publish.py`` kills it at a random moment and reads these lines
to tell where the kill landed.
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # the repository root

import numpy as np
from sqlalchemy import event

from bnserve.store.db import ModelStore
from tests.model_factory import random_model


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(url: str, name: str, seed: str, n_features: str) -> int:
    model = random_model(np.random.default_rng(int(seed)), n_features=int(n_features))
    with ModelStore(url) as store:
        said: set[str] = set()

        @event.listens_for(store.engine, "before_cursor_execute")
        def _insert(conn, cursor, statement, parameters, context, executemany) -> None:
            if "writing" not in said and statement.lstrip().upper().startswith("INSERT"):
                said.add("writing")
                say("writing")

        @event.listens_for(store.engine, "commit")
        def _commit(conn) -> None:
            if "writing" in said and "committing" not in said:
                said.add("committing")
                say("committing")

        say("ready")  # the store is open: wait for the word to go
        if sys.stdin.readline().strip() != "go":
            return 1
        say("start")
        version = store.publish(name, model, aliases=["production"])
        say(f"done {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
