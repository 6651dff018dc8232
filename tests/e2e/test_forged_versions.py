"""Forged versions (issue 27 item 9): a server started with `--verify-key` refuses every
version written into the store by someone without the signing key, and serves those the
trainer signed.

Before: the version checksum was an unkeyed sha256 and description and tags were outside
it, so whoever could write the store could change a CPT, recompute the checksums, move
production to it, and every server loaded and served it. Here the real `trainer keygen`
and `trainer fit --signing-key` publish; six forgeries are written straight into the
tables (``write_version``), each as its own version; a real `server serve --verify-key`
refuses all six (counted, logged, FAILED_PRECONDITION, production held at the last good
version) while a client calls by alias, then serves a new signed version. A server without
the key, as before, serves all six. SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import grpc
import numpy as np
import pytest

from bench.serving import Server
from bnserve.server.api import predictor_pb2 as pb
from bnserve.server.api import predictor_pb2_grpc
from bnserve.store.db import ModelStore
from bnserve.store.model import Model
from bnserve.store.signing import SigningKey, generate, signed_message
from tests.e2e.serving import PredictLoop, run_cli, sample_value, scrape, wait_until, write_version
from tests.reliability import record

FORGED = "hostile: versions forged by writing the store (a CPT with checksums recomputed, description, tags, replay, unsigned, another key)"
FEATURES = ("outlook", "windy", "humid")


def training_file(path, seed: int) -> str:
    rng = np.random.default_rng(seed)
    lines = [",".join((*FEATURES, "play"))]
    for _ in range(60):
        row = [str(rng.choice(["sun", "rain", "cloud"])), str(rng.choice(["yes", "no"])), str(rng.choice(["hi", "lo"]))]
        lines.append(",".join((*row, "yes" if (row[0] == "sun") != (rng.random() < 0.2) else "no")))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def fit(store_url: str, data: str, key: str, *more: str) -> str:
    done = run_cli(
        "trainer",
        "fit",
        "--data",
        data,
        "--algo",
        "nb",
        "--name",
        "m",
        "--alias",
        "production",
        "--store",
        store_url,
        "--signing-key",
        key,
        "--quiet",
        *more,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def reversed_cpt(model: Model) -> Model:
    """The model with its class prior reversed: still valid, another model."""
    net = model.networks[0]
    nodes = tuple(
        dataclasses.replace(n, cpt=np.ascontiguousarray(n.cpt[::-1])) if n.name == "play" else n for n in net.nodes
    )
    return dataclasses.replace(model, networks=(dataclasses.replace(net, nodes=nodes),))


def request(**selector) -> pb.PredictRequest:
    return pb.PredictRequest(model="m", instances=[pb.Instance(values={"outlook": "sun", "windy": "no"})], **selector)


def test_a_server_with_the_key_refuses_forged_versions_and_serves_signed_ones(store_url, tmp_path):
    backend = store_url.split(":", 1)[0].split("+", 1)[0]
    keys, stranger = tmp_path / "keys", tmp_path / "stranger"
    made = run_cli("trainer", "keygen", "--out", str(keys))
    assert made.returncode == 0 and made.stdout.startswith("key "), made.stderr
    private, public = str(keys / "signing-key.pem"), str(keys / "verify-key.pem")
    signer, theirs = SigningKey.read(private), SigningKey.read(generate(str(stranger))[0])
    published = fit(
        store_url, training_file(tmp_path / "a.csv", 1), private, "--description", "weekly", "--tag", "team=ml"
    )
    assert f"signed by key {signer.key_id}" in published

    with ModelStore(store_url) as store:
        v1 = store.load("m", version=1)
    good = {"description": v1.description, "signature_key": v1.signature.key_id, "signature": v1.signature.value}

    def signed(version: int, by: SigningKey = signer, description=v1.description, tags=v1.tags) -> dict:
        s = by.sign(signed_message("m", version, v1.checksum, description, tags))
        return {"description": description, "signature_key": s.key_id, "signature": s.value}

    forgeries = {  # version -> (model, version columns, tags, what the log says)
        2: (reversed_cpt(v1.model), good, v1.tags, "its signature (key"),  # checksums recomputed by model_to_rows
        3: (v1.model, {**signed(3), "description": "approved by QA"}, v1.tags, "its signature (key"),
        4: (v1.model, signed(4), {"team": "ml", "approved": "yes"}, "its signature (key"),
        5: (v1.model, good, v1.tags, "its signature (key"),  # version 1 replayed as 5
        6: (v1.model, {"description": v1.description}, v1.tags, "is unsigned"),
        7: (v1.model, signed(7, theirs), v1.tags, f"is signed by key {theirs.key_id}, which is not among the keys"),
    }
    flags = ("--poll-seconds", "0.3", "--log-level", "INFO", "--verify-key", public)
    with (
        Server(store_url, metrics=True, extra=flags) as server,
        PredictLoop(server.target, request(alias="production"), threads=1) as calls,
        grpc.insecure_channel(server.target) as channel,
    ):
        stub = predictor_pb2_grpc.PredictorStub(channel)
        calls.wait_for(lambda o: len(o) >= 5, "5 answers")

        def refused() -> float:
            text = scrape(server.metrics_port)
            return (
                sample_value(text, "bnserve_model_load_failures_total", model="m")
                if "bnserve_model_load_failures_total{" in text
                else 0.0
            )

        for version, (model, columns, tags, _) in forgeries.items():
            write_version(store_url, "m", version, model, columns=columns, tags=dict(tags), alias="production")
        wait_until(lambda: refused() == len(forgeries), "the forged versions refused")
        mark = len(calls.snapshot())
        calls.wait_for(lambda o: len(o) >= mark + 5, "5 answers after the forgeries")
        while_forged = calls.snapshot()[mark:]
        for version in forgeries:
            with pytest.raises(grpc.RpcError) as err:
                stub.Predict(request(version=version), timeout=10)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert f"version {version} was refused at load" in err.value.details()
        assert stub.Predict(request(), timeout=10).version == 1  # production held at the last signed version

        with ModelStore(store_url) as store:  # version 8, signed, production: served
            assert store.publish("m", reversed_cpt(v1.model), ["production"], signer=signer) == 8
        calls.wait_for(lambda o: o[-1].version == 8, "signed version 8 by alias")
        outcomes = calls.stop()
        server.stop()
        log = server.output()

    assert calls.codes() == {"OK": len(outcomes)}
    assert {o.version for o in while_forged} == {1} and {o.version for o in outcomes} == {1, 8}
    for version, (*_, said) in forgeries.items():
        assert f"refused m version {version} at load: model 'm' version {version}" in log
        assert said in log.split(f"refused m version {version} at load: ")[1].splitlines()[0]
    assert "alias production of m stays at version 1: version 7 was refused at load" in log
    assert "Traceback" not in log

    verified = run_cli("trainer", "show", "m:8", "--store", store_url, "--verify-key", public)
    assert verified.returncode == 0 and f"signature: key {signer.key_id} (verified with {public})" in verified.stdout
    assert "signature: none (unsigned)" in run_cli("trainer", "show", "m:6", "--store", store_url).stdout
    forged = run_cli("trainer", "show", "m:2", "--store", store_url, "--verify-key", public)
    assert (forged.returncode, forged.stdout) == (1, "")
    assert (
        forged.stderr.startswith("trainer: error: model 'm' version 2: its signature (key")
        and forged.stderr.count("\n") == 1
    )

    # Before signing, a server had no key: it serves every forgery, as this one without --verify-key does.
    with Server(store_url) as plain, grpc.insecure_channel(plain.target) as channel:
        stub = predictor_pb2_grpc.PredictorStub(channel)
        served_without_key = sum(stub.Predict(request(version=v), timeout=10).version == v for v in forgeries)
    assert served_without_key == len(forgeries)
    record(
        FORGED,
        backend,
        requests=len(outcomes),
        errors=0,
        faults=len(forgeries),
        versions=8,
        lost=0,
        refused=len(forgeries),
        served_without_key=served_without_key,
    )


def test_key_files_that_cannot_be_used_stop_the_commands_naming_them_and_import_signs(tmp_path):
    store = f"sqlite:///{tmp_path / 'store.db'}"
    made = run_cli("trainer", "keygen", "--out", str(tmp_path / "keys"))
    assert made.returncode == 0
    again = run_cli("trainer", "keygen", "--out", str(tmp_path / "keys"))
    assert again.returncode == 1 and "already exists; keygen never overwrites a key" in again.stderr
    private = tmp_path / "keys" / "signing-key.pem"
    os.chmod(private, 0o644)
    data = training_file(tmp_path / "a.csv", 1)
    done = run_cli(
        "trainer", "fit", "--data", data, "--algo", "nb", "--name", "m", "--store", store, "--signing-key", str(private)
    )
    assert done.returncode == 1 and done.stderr == (
        f"trainer: error: --signing-key {private}: the private key is readable by other users (mode 0644); "
        f"make it readable by its owner only: chmod 600 {private}\n"
    )
    assert not (tmp_path / "store.db").exists()  # refused before the training and the store
    os.chmod(private, 0o600)
    env = {**os.environ, "BNSERVE_SIGNING_KEY": str(private)}
    done = run_cli("trainer", "fit", "--data", data, "--algo", "nb", "--name", "m", "--store", store, env=env)
    assert done.returncode == 0 and "signed by key" in done.stdout, done.stderr
    bif = str(tmp_path / "m.bif")
    assert run_cli("trainer", "export", "m:1", "--out", bif, "--store", store).returncode == 0
    imported = run_cli("trainer", "import", bif, "--name", "m", "--store", store, "--signing-key", str(private))
    assert imported.returncode == 0 and "published m version 2" in imported.stdout, imported.stderr
    assert "signed by key" in imported.stdout

    served = run_cli(
        "server", "serve", "--store", store, "--port", "0", "--metrics-port", "-1", "--verify-key", str(private)
    )
    assert served.returncode == 1
    assert served.stderr.strip().splitlines()[-1] == (
        f"server: error: --verify-key {private}: holds a private key; give the public key (`trainer keygen` writes both)"
    )


def test_workers_get_the_verify_key_as_a_flag(tmp_path):
    from bnserve.server.config import ServeConfig
    from bnserve.server.workers import Supervisor
    from bnserve.store.db import upgrade_store

    assert run_cli("trainer", "keygen", "--out", str(tmp_path)).returncode == 0
    url = f"sqlite:///{tmp_path / 'store.db'}"
    upgrade_store(url)
    config = ServeConfig(
        store_url=url, host="127.0.0.1", port=0, metrics_port=-1, verify_key=str(tmp_path / "verify-key.pem")
    )
    supervisor = Supervisor(config, 2)
    try:
        command = supervisor._command()
    finally:
        supervisor._close()
    assert dict(itertools.pairwise(command))["--verify-key"] == str(tmp_path / "verify-key.pem")
