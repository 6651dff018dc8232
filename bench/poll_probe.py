"""Time the polls of whatever ``bnserve`` this process imports against a store; print JSON.

    python bench/poll_probe.py URL MODEL --polls 50

Run by ``bench/many_models.py`` for our code and, with ``PYTHONPATH`` set by
``bench.baseline``, for an earlier commit's, so both are timed the same way. Only API both
have is used: ``ModelRepository(store).refresh()`` and ``ModelStore.set_alias``. First one
refresh (the whole store read and compiled, as at a server's start), then ``polls`` times:
a refresh with nothing written, then one with the ``staging`` alias of ``MODEL`` moved
between its versions 1 and 2 (both held, so no version is loaded).
"""

from __future__ import annotations

import argparse
import json
import time

from bnserve.server.repository import ModelRepository
from bnserve.store.db import ModelStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("model", help="a model with versions 1 and 2")
    parser.add_argument("--polls", type=int, default=50)
    args = parser.parse_args()
    clock = time.perf_counter
    with ModelStore(args.url) as store:
        repository = ModelRepository(store)
        t0 = clock()
        repository.refresh()
        first = clock() - t0
        nothing, moved = [], []
        for i in range(args.polls):
            t0 = clock()
            repository.refresh()
            nothing.append(clock() - t0)
            store.set_alias(args.model, "staging", 1 + i % 2)
            t0 = clock()
            repository.refresh()
            moved.append(clock() - t0)
            assert repository.get(args.model, alias="staging")[0].version == 1 + i % 2
    print(json.dumps({"first": first, "nothing": nothing, "moved": moved}))


if __name__ == "__main__":
    main()
