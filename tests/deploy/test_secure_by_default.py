"""deploy/k8s is secure as shipped: the server's gRPC port speaks TLS only and wants a bearer
token, both from Secrets, and its probes still work; the example store gives the server a
role that may only read; the Dask cluster speaks mutual TLS and reaches nothing outside.
Each promise is run where it can be: the server (in this process) with the settings the pod
gets, the probes' commands against it, the example PostgreSQL's init script on PostgreSQL.
The NetworkPolicies are in test_kubernetes.py, beside the other policies."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

from tests.deploy.test_kubernetes import (
    DASK,
    DASK_SCHEDULER,
    DASK_VOLUMES,
    POSTGRES,
    PROBES,
    STORE_SECRET,
    WRITER_SECRET,
    applied,
    container_env,
    dask_container,
    example_store_url,
    one,
    pod_specs,
    probe_args,
    server_container,
    yaml,
)

TLS_SECRET, AUTH_SECRET, DASK_TLS_SECRET = "bnserve-tls", "bnserve-auth", "bnserve-dask-tls"
PRIVATE = 0o440  # a Secret's files: the owner and the pod's group (fsGroup) may read them, no one else


def secret_mounts(spec: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """mount path -> the Secret mounted there, read-only and private, in ``container`` of ``spec``."""
    volumes = {v["name"]: v["secret"] for v in spec["volumes"] if "secret" in v}
    found = {}
    for mount in container["volumeMounts"]:
        if mount["name"] in volumes:
            assert mount.get("readOnly") is True and "subPath" not in mount, mount  # subPath: never updated
            assert volumes[mount["name"]]["defaultMode"] == PRIVATE
            found[mount["mountPath"]] = volumes[mount["name"]]["secretName"]
    return found


def in_secret(path: str, mounts: dict[str, str]) -> tuple[str, str]:
    """(Secret, key) of the file ``path`` in a Secret mounted at one of ``mounts``."""
    folder, _, key = path.rpartition("/")
    assert folder in mounts, f"{path} is in no mounted Secret"
    return mounts[folder], key


# --- the server: TLS and a token, from Secrets ------------------------------------------


def serve_args(environ: dict[str, str]) -> Any:
    from bnserve.server.cli import parse_args

    container = server_container()
    return parse_args(container.get("args", []), environ=environ)


def test_the_server_takes_its_certificate_and_tokens_from_secrets():
    """The pod's `server serve` gets --tls-cert, --tls-key and --auth-token-file (BNSERVE_*
    in the ConfigMap), files of the Secrets bnserve-tls and bnserve-auth mounted read-only;
    the probes' CA is bnserve-tls's too."""
    container = server_container()
    args = serve_args(container_env(container))
    mounts = secret_mounts(one("Deployment")["spec"]["template"]["spec"], container)
    assert in_secret(args.tls_cert, mounts) == (TLS_SECRET, "tls.crt")
    assert in_secret(args.tls_key, mounts) == (TLS_SECRET, "tls.key")
    assert in_secret(args.auth_token_file, mounts) == (AUTH_SECRET, "tokens")
    assert args.tls_client_ca is None  # clients prove themselves with the token
    for probe in PROBES:
        assert in_secret(probe_args(probe).tls_ca, mounts) == (TLS_SECRET, "ca.crt")
    assert all(d["kind"] != "Secret" for d in applied()), "the operator makes the Secrets, never kustomize"


def _secret_files(tmp_path: Path, server_name: str) -> dict[str, Path]:
    """The two Secrets' files, as the pod would see them, in folders of their own: a CA, a
    certificate it signed for ``server_name`` and its key; a token file."""
    from tests.certificates import _ca, _signed

    pki = tmp_path / "pki"
    pki.mkdir()
    ca = _ca(pki, "ca")
    server = _signed(
        pki,
        ca,
        "server",
        f"/CN={server_name}",
        "basicConstraints=CA:FALSE\n"
        f"keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:{server_name}\n",
    )
    tls, auth = tmp_path / "tls", tmp_path / "auth"
    tls.mkdir()
    auth.mkdir()
    for name, path in (("ca.crt", ca.cert), ("tls.crt", server.cert), ("tls.key", server.key)):
        (tls / name).write_bytes(path.read_bytes())
    (auth / "tokens").write_text(secrets.token_hex(16) + "\n")
    return {TLS_SECRET: tls, AUTH_SECRET: auth}


def test_the_server_as_configured_wants_tls_and_a_token_and_its_probes_pass(tmp_path):
    """The server started with the pod's settings (the Secrets' mount paths made these test
    folders): a plaintext call fails, a TLS call without the token is UNAUTHENTICATED, one
    with it is answered; each probe's command, run as the kubelet would, exits 0 (SERVING)."""
    from bnserve.server.client import Client
    from tests.in_process_server import running_app
    from tests.model_factory import random_model

    container = server_container()
    mounts = secret_mounts(one("Deployment")["spec"]["template"]["spec"], container)
    server_name = probe_args("readinessProbe").tls_server_name
    files = _secret_files(tmp_path, server_name)
    local = {path: str(files[secret]) for path, secret in mounts.items()}

    def localise(text: str) -> str:
        for path, folder in local.items():
            text = text.replace(path + "/", folder + "/")
        return text

    environ = {k: localise(v) for k, v in container_env(container).items()}
    args = serve_args(environ)
    model = random_model(np.random.default_rng(8), n_features=2)
    with running_app(
        tmp_path, {"m": model}, tls_cert=args.tls_cert, tls_key=args.tls_key, auth_token_file=args.auth_token_file
    ) as app:
        target = f"127.0.0.1:{app.port}"
        for probe in PROBES:  # in the container's environment, as the kubelet runs it
            command = [localise(a).replace("127.0.0.1:50051", target) for a in container[probe]["exec"]["command"]]
            done = subprocess.run(
                [str(Path(sys.executable).parent / command[0]), *command[1:]],
                env={**os.environ, **environ},
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0 and done.stdout.strip() == "SERVING", f"{probe}: {done.stderr}"
        token = (files[AUTH_SECRET] / "tokens").read_text().strip()
        ca = (files[TLS_SECRET] / "ca.crt").read_bytes()
        name = [("grpc.ssl_target_name_override", server_name)]
        with Client(target, retries=0, timeout=5) as plaintext, pytest.raises(grpc.RpcError) as refused:
            plaintext.list_models()
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        with (
            Client(target, root_certificates=ca, options=name, retries=0) as anonymous,
            pytest.raises(grpc.RpcError) as refused,
        ):
            anonymous.list_models()
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with Client(target, root_certificates=ca, options=name, token=token, retries=0) as client:
            assert [m.name for m in client.list_models()] == ["m"]


# --- the example store: the server may only read --------------------------------------


def test_the_servers_example_role_is_not_the_writers():
    reader, writer = example_store_url(STORE_SECRET), example_store_url(WRITER_SECRET)
    assert reader.username != writer.username and reader.password != writer.password
    assert (reader.host, reader.port, reader.database) == (writer.host, writer.port, writer.database)


@pytest.mark.postgresql
def test_the_example_postgres_makes_a_role_that_may_only_read(pg_fresh_database, tmp_path):
    """The example PostgreSQL's init script, run on PostgreSQL as the image runs it (as the
    owner, before any table exists): the owner then migrates and publishes, and the servers'
    role reads the model but may not write."""
    import psycopg
    from sqlalchemy import make_url

    from bnserve.store.db import ModelStore
    from bnserve.store.errors import PermissionDenied
    from tests.model_factory import random_model

    statefulset = one("StatefulSet", docs=applied(POSTGRES))["spec"]["template"]["spec"]
    (mount,) = [m for m in statefulset["containers"][0]["volumeMounts"] if m["name"] == "init"]
    (volume,) = [v for v in statefulset["volumes"] if v["name"] == mount["name"]]
    scripts = one("ConfigMap", volume["configMap"]["name"], applied(POSTGRES))["data"]
    for file, text in scripts.items():
        (tmp_path / file).write_text(text.replace(mount["mountPath"] + "/", f"{tmp_path}/"))
    url = make_url(pg_fresh_database)
    reader = f"reader_{secrets.token_hex(4)}"
    env = {
        **os.environ,
        "PGHOST": url.host or "127.0.0.1",
        "PGPORT": str(url.port or 5432),
        "POSTGRES_USER": url.username,
        "POSTGRES_DB": url.database,
        "BNSERVE_READER_USER": reader,
        "BNSERVE_READER_PASSWORD": "pw",
    }
    (script,) = [f for f in scripts if f.endswith(".sh")]
    done = subprocess.run(["sh", str(tmp_path / script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    try:
        with ModelStore(pg_fresh_database, create=True) as owner:  # `trainer db upgrade` and a publish
            owner.publish("m", random_model(np.random.default_rng(4), n_features=2), aliases=["production"])
        with ModelStore(url.set(username=reader, password="pw").render_as_string(hide_password=False)) as store:
            assert store.load("m", alias="production").version == 1
            with pytest.raises(PermissionDenied):
                store.publish("m", random_model(np.random.default_rng(5), n_features=2))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP OWNED BY "{reader}"')
            conn.execute(f'DROP ROLE "{reader}"')


# --- Dask: mutual TLS, and nothing outside ----------------------------------------------

DASK_PODS = ("bnserve-dask-scheduler", "bnserve-dask-worker", "Dask Job")


def test_dask_speaks_only_tls_with_the_certificate_of_a_secret():
    settings = yaml.safe_load(one("ConfigMap", "bnserve-dask-config", applied(DASK))["data"]["dask.yaml"])
    comm = settings["distributed"]["comm"]
    assert comm["require-encryption"] is True, "a tcp:// connection is refused"
    tls = comm["tls"]
    files = [tls["ca-file"]] + [
        tls[role][part] for role in ("scheduler", "worker", "client") for part in ("cert", "key")
    ]
    for what in DASK_PODS:
        spec = dict(pod_specs())[what]
        (container,) = spec["containers"]
        mounts = secret_mounts(spec, container)
        assert {in_secret(f, mounts)[0] for f in files} == {DASK_TLS_SECRET}
        config_mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}["dask-config"]
        assert config_mount == DASK_VOLUMES["dask-config"] == "/etc/dask", "where Dask reads its configuration"
    assert dask_container("bnserve-dask-worker")["args"][0] == DASK_SCHEDULER
    assert "--protocol" in dask_container("bnserve-dask-scheduler")["args"]
    assert all(d["kind"] != "Secret" for d in applied(DASK))


def test_the_dask_pods_reach_only_each_other_and_dns():
    """No egress to any address on 443 (or any other port): Dask pods, and DNS."""
    policy = one("NetworkPolicy", "bnserve-dask", applied(DASK))["spec"]
    for rule in policy["egress"]:
        if "to" in rule:
            assert all(peer.keys() == {"podSelector"} for peer in rule["to"]), rule  # no ipBlock, no namespace
            (expression,) = rule["to"][0]["podSelector"]["matchExpressions"]
            assert set(expression["values"]) == {"dask-scheduler", "dask-worker"}
        else:
            assert {p["port"] for p in rule["ports"]} == {53}, f"egress to anywhere: {rule}"
    assert "443" not in json.dumps(policy)
