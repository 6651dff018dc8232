"""A publisher SIGKILLed at a random moment leaves the store holding only complete versions.

Each round starts ``tests/store/publish_child.py`` (a process publishing a model of 1,000
features with the alias ``production``, large enough that its transaction takes a while)
and kills it with SIGKILL after a random delay drawn from 0 to twice the longest of two
measured publishes. After every kill the tables are read directly: every version has all its
rows and no row belongs to a version that is not there; every new version loads (its
checksums pass), equals the published model and compiles, as the server would; and
``production`` names the newest version, as each publish moved it in its transaction.
The child's lines say where each kill landed: before the first INSERT, during the writes,
during the commit, or after ``publish`` returned.
"""

from __future__ import annotations

import collections
import pathlib
import subprocess
import sys
import time

import numpy as np
import sqlalchemy as sa

from bnserve.server.repository import ModelRepository
from bnserve.store.db import ModelStore
from bnserve.store.predictor import compile_model
from tests.model_factory import random_model
from tests.reliability import record

CHILD = pathlib.Path(__file__).with_name("publish_child.py")
NAME, SEED, N_FEATURES = "killed", 11, 1000
KILLS = 20
SPARES = 2  # publishers started ahead, so that their start-up overlaps the rounds
VERSION_TABLES = ("variables", "cpts", "arcs")


class Publisher:
    """One child, started at once and told to publish by ``go`` (so its start-up is not timed)."""

    def __init__(self, url: str):
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD), url, NAME, str(SEED), str(N_FEATURES)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )

    def go(self) -> None:
        ready = self.proc.stdout.readline().strip()
        assert ready == "ready", f"the publisher did not start: {ready!r} {self.proc.stderr.read()}"
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "start"

    def finish(self) -> tuple[list[str], float]:
        """Let it publish; its lines and the seconds from ``start`` to ``done``."""
        t0 = time.monotonic()
        lines = []
        while not (lines and lines[-1].startswith("done")):
            line = self.proc.stdout.readline()
            assert line, f"the publisher died: {self.proc.stderr.read()}"
            lines.append(line.strip())
        seconds = time.monotonic() - t0
        assert self.proc.wait(timeout=60) == 0
        return lines, seconds

    def kill_after(self, delay: float) -> list[str]:
        time.sleep(delay)
        self.proc.kill()
        self.proc.wait(timeout=60)
        return self.proc.stdout.read().split()


def expected_rows(model) -> dict[str, int]:
    return {
        "variables": len(model.variables),
        "cpts": sum(len(net.nodes) for net in model.networks),
        "arcs": sum(len(net.arcs) for net in model.networks),
    }


def table_census(engine: sa.Engine) -> tuple[dict[int, dict[str, int]], dict[str, int], dict[str, int]]:
    """(rows per version per table, orphan rows per table, alias -> version), read directly."""
    with engine.connect() as conn:
        versions = [
            v
            for (v,) in conn.execute(
                sa.text(
                    "SELECT version FROM model_versions v JOIN models m ON m.id = v.model_id WHERE m.name = :n "
                    "ORDER BY version"
                ),
                {"n": NAME},
            )
        ]
        per_version = {v: {} for v in versions}
        orphans = {}
        for table in VERSION_TABLES:
            for version, n in conn.execute(sa.text(f"SELECT version, count(*) FROM {table} GROUP BY version")):
                per_version.setdefault(version, {})[table] = n
            orphans[table] = conn.execute(
                sa.text(
                    f"SELECT count(*) FROM {table} t WHERE NOT EXISTS (SELECT 1 FROM model_versions v "
                    f"WHERE v.model_id = t.model_id AND v.version = t.version)"
                )
            ).scalar_one()
        aliases = dict(conn.execute(sa.text("SELECT alias, version FROM model_aliases")).all())
    return per_version, orphans, aliases


def landed(lines: list[str]) -> str:
    if any(line.startswith("done") for line in lines):
        return "after publish returned"
    if "committing" in lines:
        return "during the commit"
    if "writing" in lines:
        return "during the writes"
    return "before the first write"


def test_a_publisher_killed_at_random_moments_leaves_only_complete_versions(store_url):
    backend = "postgresql" if store_url.startswith("postgresql") else "sqlite"
    model = random_model(np.random.default_rng(SEED), n_features=N_FEATURES)
    rows = expected_rows(model)
    engine = sa.create_engine(store_url)
    store = ModelStore(store_url)
    try:
        # two whole publishes, timed as the killed ones will run: while the next publishers start up
        spares = collections.deque(Publisher(store_url) for _ in range(SPARES))
        publish_seconds = 0.0
        for version in (1, 2):
            publisher = spares.popleft()
            spares.append(Publisher(store_url))
            publisher.go()
            lines, seconds = publisher.finish()
            assert lines[-1] == f"done {version}"
            publish_seconds = max(publish_seconds, seconds)
        verified = set()

        def check(round_: int) -> list[int]:
            per_version, orphans, aliases = table_census(engine)
            assert orphans == dict.fromkeys(VERSION_TABLES, 0), f"round {round_}: rows of no version: {orphans}"
            for version, counts in per_version.items():
                assert counts == rows, f"round {round_}: version {version} is incomplete: {counts} != {rows}"
            versions = sorted(per_version)
            assert versions == list(range(1, len(versions) + 1))
            assert aliases == {"production": versions[-1]}
            for version in set(versions) - verified:
                loaded = store.load(NAME, version=version)  # every blob's sha256 and the version checksum
                assert loaded.checksum == model.checksum()
                compile_model(loaded.model)
                verified.add(version)
            return versions

        versions = check(0)
        rng = np.random.default_rng(2024)
        outcomes: collections.Counter[str] = collections.Counter()
        committed: collections.Counter[str] = collections.Counter()
        for round_ in range(1, KILLS + 1):
            publisher = spares.popleft()
            if round_ + len(spares) < KILLS:
                spares.append(Publisher(store_url))
            publisher.go()
            where = landed(publisher.kill_after(rng.uniform(0, 2 * publish_seconds)))
            before = len(versions)
            versions = check(round_)
            assert len(versions) in (before, before + 1)
            outcomes[where] += 1
            if len(versions) > before:
                committed[where] += 1
                assert where != "before the first write"
            else:
                assert where != "after publish returned"

        repository = ModelRepository(store)  # what the server does with it: every version serves
        repository.refresh()
        assert repository.get(NAME)[0].version == versions[-1]
        assert all(repository.get(NAME, version=v)[0].checksum == model.checksum() for v in versions)
    finally:
        store.dispose()
        engine.dispose()
    print(f"{backend}: publish {publish_seconds:.3f} s; kills landed {dict(outcomes)}; committed {dict(committed)}")
    record(
        "publisher SIGKILLed at a random moment",
        backend,
        faults=KILLS,
        versions=len(versions),
        lost=0,
        publish_seconds=round(publish_seconds, 3),
        kills_landed=dict(outcomes),
        kills_committed=dict(committed),
        versions_verified=len(verified),
    )
