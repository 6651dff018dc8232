"""deploy/k8s: the manifests, checked with real tools and against the real CLIs.

- Every manifest of a built-in kind validates with kubernetes-validate against the
  Kubernetes version K8S_VERSION (1.31), strictly: an unknown or misspelt field fails.
  The ServiceMonitor is a CRD (Prometheus Operator) that kubernetes-validate has no schema
  for: it is validated against SERVICE_MONITOR_SCHEMA below, the subset of the CRD's
  schema for the fields we use, with unknown fields rejected there too.
- ``kubectl kustomize`` renders deploy/k8s and deploy/k8s/examples/postgres; the rendered
  documents (what ``kubectl apply -k`` sends) have exactly the expected kinds, all in the
  namespace bnserve, and validate the same way.
- The settings the server and the trainer receive are parsed by their own parsers
  (server.cli, trainer.cli), and the training command is run against a SQLite store.
- Everything else the deployment promises: replicas, probes, resources, hardening, the
  drain budget, the Secret, HPA, PDB, NetworkPolicy, Service, scrape annotations.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.conftest import DEPLOY, IMAGE_UID, require_module, require_tool

yaml = require_module("yaml")

K8S_VERSION = "1.31"  # the Kubernetes version every manifest is validated against
K8S = DEPLOY / "k8s"
POSTGRES = K8S / "examples" / "postgres"
DASK = K8S / "dask"
NAMESPACE = "bnserve"
NAME_LABEL = "app.kubernetes.io/name"
STORE_SECRET, STORE_SECRET_KEY = "bnserve-store", "url"  # what the servers read: a role that may only read
WRITER_SECRET = "bnserve-store-writer"  # the migration and the training: a role that may alter and write
DASK_SCHEDULER = "tls://bnserve-dask-scheduler:8786"  # TLS only: every Dask connection is mutual TLS
DASK_VOLUMES = {"dask-config": "/etc/dask", "dask-tls": "/etc/dask-tls"}  # Dask's configuration, its certificate
# The kinds `kubectl apply -k` creates, by kustomization folder.
EXPECTED_KINDS = {
    K8S: Counter(
        {
            "Namespace": 1,
            "ServiceAccount": 1,
            "ConfigMap": 1,
            "Deployment": 1,
            "Service": 2,
            "HorizontalPodAutoscaler": 1,
            "PodDisruptionBudget": 1,
            "NetworkPolicy": 2,
            "PersistentVolumeClaim": 1,
            "CronJob": 1,
            "ServiceMonitor": 1,
        }
    ),
    POSTGRES: Counter({"Secret": 1, "ConfigMap": 1, "Service": 1, "StatefulSet": 1}),
    DASK: Counter({"ConfigMap": 1, "Deployment": 2, "Service": 1, "NetworkPolicy": 1}),
}
CLUSTER_SCOPED = {"Namespace"}

# The ServiceMonitor fields we use, as the Prometheus Operator's CRD defines them.
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
SERVICE_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "ServiceMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "additionalProperties": False,
            "properties": {"name": {"type": "string"}, "namespace": {"type": "string"}, "labels": _LABELS},
        },
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "additionalProperties": False,
            "properties": {
                "selector": {"type": "object", "additionalProperties": False, "properties": {"matchLabels": _LABELS}},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "additionalProperties": False,
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string", "pattern": "^/"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {
                                "type": "string",
                                "pattern": r"^(0|(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
                            },
                        },
                    },
                },
            },
        },
    },
}


# --- loading -----------------------------------------------------------------------------


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kustomization(folder: Path) -> dict[str, Any]:
    return documents(folder / "kustomization.yaml")[0]


def applied(folder: Path = K8S) -> list[dict[str, Any]]:
    """The documents of the files the kustomization lists, as written (no tool needed)."""
    return [d for f in kustomization(folder)["resources"] for d in documents(folder / f)]


def one(kind: str, name: str | None = None, docs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    found = [
        d
        for d in (applied() if docs is None else docs)
        if d["kind"] == kind and (name is None or d["metadata"].get("name") == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """(what, pod spec) of every workload: the Deployment, the CronJob, the one-off Jobs, the
    Dask scheduler and workers."""
    yield "Deployment", one("Deployment")["spec"]["template"]["spec"]
    yield "CronJob", one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    yield "Job", one("Job", docs=documents(K8S / "job-train.yaml"))["spec"]["template"]["spec"]
    yield "Dask Job", one("Job", docs=documents(DASK / "job-train-dask.yaml"))["spec"]["template"]["spec"]
    for name in ("bnserve-dask-scheduler", "bnserve-dask-worker"):
        yield name, one("Deployment", name, applied(DASK))["spec"]["template"]["spec"]


def config() -> dict[str, str]:
    return one("ConfigMap")["data"]


def container_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's environment as the kubelet builds it from ConfigMaps and literals
    (Secret values are placeholders)."""
    maps = {d["metadata"]["name"]: d["data"] for d in applied() if d["kind"] == "ConfigMap"}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(maps[source["configMapRef"]["name"]])
    for var in container.get("env", []):
        env[var["name"]] = var.get("value", f"<{var['name']} from a Secret>")
    return env


def expand(arg: str, env: dict[str, str]) -> str:
    """The kubelet's $(VAR) expansion in command and args ($$ escapes); an unknown variable
    is left as is by the kubelet, and is an error here."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        assert m.group(1) in env, f"$({m.group(1)}) is not in the container's environment"
        return env[m.group(1)]

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


def manifest_files() -> list[Path]:
    return sorted(p for p in K8S.rglob("*.yaml") if p.name != "kustomization.yaml")


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- schema validation ---------------------------------------------------------------


def validate(doc: dict[str, Any]) -> None:
    if doc["kind"] == "ServiceMonitor":
        jsonschema = require_module("jsonschema")
        jsonschema.validate(doc, SERVICE_MONITOR_SCHEMA)
        return
    kv = require_module("kubernetes_validate")
    try:
        kv.validate(doc, K8S_VERSION, strict=True)
    except kv.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{doc['kind']}/{doc['metadata'].get('name')}: {where}: {exc.message}", pytrace=False)


@pytest.mark.parametrize("path", manifest_files(), ids=lambda p: str(p.relative_to(K8S)))
def test_manifest_validates(path):
    docs = documents(path)
    assert docs
    for doc in docs:
        validate(doc)


def test_the_validator_rejects_a_misspelt_field():
    """Strict really is strict: a typo in a container's securityContext fails."""
    kv = require_module("kubernetes_validate")
    deployment = one("Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["readOnlyRootFilesytem"] = True
    with pytest.raises(kv.ValidationError, match="readOnlyRootFilesytem"):
        kv.validate(deployment, K8S_VERSION, strict=True)


def render(folder: Path) -> list[dict[str, Any]]:
    kubectl = require_tool("kubectl")
    result = subprocess.run([kubectl, "kustomize", str(folder)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


@pytest.mark.parametrize("folder", [K8S, POSTGRES, DASK], ids=["k8s", "examples/postgres", "dask"])
def test_kustomize_renders_valid_documents_in_the_namespace(folder):
    rendered = render(folder)
    assert Counter(d["kind"] for d in rendered) == EXPECTED_KINDS[folder]
    for doc in rendered:
        validate(doc)
        meta = doc["metadata"]
        if doc["kind"] in CLUSTER_SCOPED:
            assert meta["name"] == NAMESPACE and "namespace" not in meta
        else:
            assert meta.get("namespace") == NAMESPACE, f"{doc['kind']}/{meta['name']}"
        assert NAME_LABEL in meta.get("labels", {})
    # The rendered selectors still pick the pods they were written for (kustomize adds
    # labels to objects and pod templates, never to selectors).
    if folder == K8S:
        pods = one("Deployment", docs=rendered)["spec"]["template"]["metadata"]["labels"]
        assert matches(one("Service", "bnserve", rendered)["spec"]["selector"], pods)
        assert matches(one("PodDisruptionBudget", docs=rendered)["spec"]["selector"]["matchLabels"], pods)
        policy = one("NetworkPolicy", "bnserve-server", rendered)["spec"]
        assert matches(policy["podSelector"]["matchLabels"], pods)
        assert policy == one("NetworkPolicy", "bnserve-server")["spec"], "the client peers must stay as written"


def test_secrets_and_one_off_job_are_not_applied_by_kustomize():
    resources = kustomization(K8S)["resources"]
    assert not any(r.startswith(("examples", "dask")) for r in resources)
    assert "job-train.yaml" not in resources
    assert "job-train-dask.yaml" not in kustomization(DASK)["resources"]
    assert all(d["kind"] != "Secret" for d in applied() + applied(DASK))


# --- the server -----------------------------------------------------------------------


def server_container() -> dict[str, Any]:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    return container


def test_deployment_keeps_two_replicas_through_a_rollout():
    spec = one("Deployment")["spec"]
    assert spec["replicas"] >= 2
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    assert matches(spec["selector"]["matchLabels"], spec["template"]["metadata"]["labels"])
    pod = spec["template"]["spec"]
    spread = pod.get("topologySpreadConstraints", [])
    assert any(c["topologyKey"] == "kubernetes.io/hostname" for c in spread) or "podAntiAffinity" in pod.get(
        "affinity", {}
    )


def test_server_settings_parse_with_the_servers_parser_and_match_the_ports():
    """`server serve` as the pod runs it: the container's args with its environment."""
    from bnserve.server.cli import SERVE_ENV_FLAGS, build_parser
    from bnserve.server.config import ServeConfig

    container = server_container()
    args = build_parser(environ=container_env(container)).parse_args(container.get("args", []))
    assert args.command == "serve"
    ServeConfig(store_url="sqlite://", **{name: getattr(args, name) for name in SERVE_ENV_FLAGS})  # within bounds
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"grpc": args.port, "metrics": args.metrics_port}
    assert args.grace_seconds == float(config()["BNSERVE_GRACE_SECONDS"])
    annotations = one("Deployment")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(args.metrics_port)
    assert annotations["prometheus.io/path"] == "/metrics"


PROBES = ("startupProbe", "readinessProbe", "livenessProbe")


def probe_args(probe: str) -> Any:
    """The probe's exec command, parsed by the server's own parser (the kubelet runs it in the
    container, whose image's `server` it is)."""
    from bnserve.server.cli import parse_args

    command = server_container()[probe]["exec"]["command"]
    assert command[:2] == ["server", "health"], f"{probe}: {command}"
    return parse_args(command[1:], environ={})


def test_probes_ask_grpc_health_over_tls_on_the_grpc_port():
    """The gRPC port speaks TLS only, which the kubelet's own gRPC probe cannot: each probe is
    `server health` over TLS on the gRPC port; readiness and start-up ask for the Predictor
    (SERVING once the store is read), liveness for the server as a whole."""
    from bnserve.server.app import PREDICTOR

    container = server_container()
    grpc_port = {p["name"]: p["containerPort"] for p in container["ports"]}["grpc"]
    for probe in PROBES:
        assert "grpc" not in container[probe] and "tcpSocket" not in container[probe]
        args = probe_args(probe)
        assert args.target == f"127.0.0.1:{grpc_port}"
        assert args.tls_ca is not None and args.token_file is None
        assert args.service == ("" if probe == "livenessProbe" else PREDICTOR.full_name)
        assert args.timeout < container[probe]["timeoutSeconds"], "the call ends before the kubelet gives up"
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 300, "5 minutes to read the store"


def test_termination_grace_covers_prestop_and_drain():
    """preStop sleep + BNSERVE_GRACE_SECONDS + 10 s (a --workers parent kills a worker
    10 s past the grace) must end before the kubelet's SIGKILL."""
    pod = one("Deployment")["spec"]["template"]["spec"]
    command = server_container()["lifecycle"]["preStop"]["exec"]["command"]
    assert command[0] == "sleep"
    drain = float(command[1]) + float(config()["BNSERVE_GRACE_SECONDS"]) + 10
    assert pod["terminationGracePeriodSeconds"] > drain


def cpu_cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if str(quantity).endswith("m") else float(quantity)


@pytest.mark.parametrize(
    "what", ["Deployment", "CronJob", "Job", "Dask Job", "bnserve-dask-scheduler", "bnserve-dask-worker"]
)
def test_every_container_has_requests_limits_and_hardening(what):
    spec = dict(pod_specs())[what]
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True and security["runAsUser"] == IMAGE_UID
    assert security["seccompProfile"]["type"] == "RuntimeDefault"
    assert spec["automountServiceAccountToken"] is False
    tmp_volumes = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
    for container in spec.get("initContainers", []) + spec["containers"]:
        for kind in ("requests", "limits"):
            assert {"cpu", "memory"} <= container["resources"][kind].keys()
        hardening = container["securityContext"]
        assert hardening["allowPrivilegeEscalation"] is False
        assert hardening["readOnlyRootFilesystem"] is True
        assert hardening["capabilities"]["drop"] == ["ALL"]
        assert any(m["mountPath"] == "/tmp" and m["name"] in tmp_volumes for m in container["volumeMounts"])


def test_workers_fit_in_the_cpu_limit():
    limit = cpu_cores(server_container()["resources"]["limits"]["cpu"])
    assert int(config().get("BNSERVE_WORKERS", "1")) <= max(1, limit)


@pytest.mark.parametrize(
    "what, secret",
    [("Deployment", STORE_SECRET), ("CronJob", WRITER_SECRET), ("Job", WRITER_SECRET), ("Dask Job", WRITER_SECRET)],
)
def test_store_url_comes_from_the_secret_and_settings_from_the_configmap(what, secret):
    (container,) = dict(pod_specs())[what]["containers"]
    (store,) = [v for v in container["env"] if v["name"] == "BNSERVE_STORE_URL"]
    assert store == {
        "name": "BNSERVE_STORE_URL",
        "valueFrom": {"secretKeyRef": {"name": secret, "key": STORE_SECRET_KEY}},
    }
    assert all("value" not in v for v in container["env"]), "no literal settings beside the ConfigMap"
    assert [s["configMapRef"]["name"] for s in container["envFrom"]] == [one("ConfigMap")["metadata"]["name"]]


def test_service_exposes_grpc_and_metrics():
    ports = {p["name"]: p for p in one("Service", "bnserve")["spec"]["ports"]}
    container_ports = {p["name"]: p["containerPort"] for p in server_container()["ports"]}
    assert one("Service", "bnserve")["spec"]["type"] == "ClusterIP"
    assert ports.keys() == {"grpc", "metrics"}
    for name, port in ports.items():
        assert port["targetPort"] == name and port["port"] == container_ports[name]
    assert ports["grpc"]["appProtocol"] == "grpc"
    headless = one("Service", "bnserve-headless")["spec"]
    assert headless["clusterIP"] == "None" and headless["selector"] == one("Service", "bnserve")["spec"]["selector"]


def test_hpa_and_pdb_keep_the_deployment_available():
    hpa = one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "bnserve"}
    assert 2 <= hpa["spec"]["minReplicas"] <= one("Deployment")["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["resource"]["name"] == "cpu" and metric["resource"]["target"]["type"] == "Utilization"
    pdb = one("PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1" and pdb["spec"]["minAvailable"] == 1
    assert matches(pdb["spec"]["selector"]["matchLabels"], one("Deployment")["spec"]["template"]["metadata"]["labels"])


OWN_NAMESPACE = {"kubernetes.io/metadata.name": NAMESPACE}
MONITORING = {"kubernetes.io/metadata.name": "monitoring"}
CLIENT = {"bnserve-client": "true"}
PROMETHEUS = {"app.kubernetes.io/name": "prometheus"}


def admitted(policy: dict[str, Any], port: str, pod: dict[str, str], namespace: dict[str, str]) -> bool:
    """Whether ``policy`` lets a pod labelled ``pod``, in a namespace labelled ``namespace``,
    in on the container port named ``port``, as Kubernetes reads ingress peers: a podSelector
    alone picks pods of the policy's own namespace, a namespaceSelector alone every pod of the
    namespaces it picks, both together the pods it picks in those namespaces."""
    for rule in policy["ingress"]:
        if "ports" in rule and port not in {p["port"] for p in rule["ports"]}:
            continue
        for peer in rule.get("from", [{}]):
            assert peer.keys() <= {"podSelector", "namespaceSelector"}, peer
            assert all(s.keys() <= {"matchLabels"} for s in peer.values()), "only matchLabels is read here"
            pods = matches(peer.get("podSelector", {}).get("matchLabels", {}), pod)
            if "namespaceSelector" in peer:
                where = matches(peer["namespaceSelector"].get("matchLabels", {}), namespace)
            else:
                where = namespace == OWN_NAMESPACE
            if pods and where:
                return True
    return False


def test_network_policy_lets_in_labelled_clients_and_prometheus_and_out_postgres_and_dns():
    pods = one("Deployment")["spec"]["template"]["metadata"]["labels"]
    policy = one("NetworkPolicy", "bnserve-server")["spec"]
    assert matches(policy["podSelector"]["matchLabels"], pods)
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    assert {p["port"] for rule in policy["ingress"] for p in rule["ports"]} == {"grpc", "metrics"}
    assert {p["name"] for p in server_container()["ports"]} == {"grpc", "metrics"}
    shop, labelled_shop = {"kubernetes.io/metadata.name": "shop"}, {"kubernetes.io/metadata.name": "shop", **CLIENT}
    # gRPC: a pod labelled bnserve-client=true, here or in a namespace labelled so; no other
    assert admitted(policy, "grpc", CLIENT, OWN_NAMESPACE)
    assert admitted(policy, "grpc", {**CLIENT, "app": "shop"}, labelled_shop)
    assert not admitted(policy, "grpc", {"app": "anything"}, OWN_NAMESPACE), "an unlabelled pod of the namespace"
    assert not admitted(policy, "grpc", {"app": "anything"}, labelled_shop), "an unlabelled pod of a client namespace"
    assert not admitted(policy, "grpc", CLIENT, shop), "a labelled pod of a namespace not labelled"
    assert not admitted(policy, "grpc", PROMETHEUS, MONITORING)
    # /metrics: Prometheus in monitoring; not the clients, not another pod of monitoring
    assert admitted(policy, "metrics", PROMETHEUS, MONITORING)
    assert not admitted(policy, "metrics", {"app.kubernetes.io/name": "grafana"}, MONITORING)
    assert not admitted(policy, "metrics", CLIENT, OWN_NAMESPACE)
    assert not admitted(policy, "metrics", PROMETHEUS, OWN_NAMESPACE)
    egress = {(p["port"], p.get("protocol", "TCP")) for rule in policy["egress"] for p in rule["ports"]}
    assert egress == {(5432, "TCP"), (53, "UDP"), (53, "TCP")}
    train = one("NetworkPolicy", "bnserve-train")["spec"]
    cron_pods = one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["metadata"]["labels"]
    assert matches(train["podSelector"]["matchLabels"], cron_pods) and train["ingress"] == []


def test_service_monitor_scrapes_the_services_metrics_port():
    monitor = one("ServiceMonitor")
    service = one("Service", "bnserve")
    assert matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert not matches(
        monitor["spec"]["selector"]["matchLabels"], one("Service", "bnserve-headless")["metadata"]["labels"]
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]} and endpoint["port"] == "metrics"
    assert endpoint["path"] == "/metrics" and endpoint["interval"] == "15s"


# --- the schema migration -------------------------------------------------------------


def migrate_container() -> dict:
    (container,) = one("Deployment")["spec"]["template"]["spec"]["initContainers"]
    return container


def test_the_migration_runs_before_the_server_with_the_writers_secret_and_the_same_image():
    container = migrate_container()
    assert container["image"] == server_container()["image"]
    assert container["env"] == [
        {"name": "BNSERVE_STORE_URL", "valueFrom": {"secretKeyRef": {"name": WRITER_SECRET, "key": STORE_SECRET_KEY}}}
    ]


def test_the_migration_command_creates_a_store_the_server_then_opens(tmp_path, monkeypatch):
    """The init container's command, parsed and run by the real trainer CLI on a new SQLite
    store; the server's check then passes, where it refused the store before."""
    from bnserve.store.db import ModelStore
    from bnserve.store.errors import SchemaMismatch
    from bnserve.trainer.cli import build_parser, main

    container = migrate_container()
    argv = container["command"] + container.get("args", [])
    assert argv == ["trainer", "db", "upgrade"]
    assert build_parser().parse_args(argv[1:]).store is None, "the URL comes from BNSERVE_STORE_URL (the Secret)"
    url = f"sqlite:///{tmp_path / 'store.db'}"
    (tmp_path / "store.db").touch()  # an empty database, as a new PostgreSQL is
    with pytest.raises(SchemaMismatch, match="trainer db upgrade"):
        ModelStore(url)
    monkeypatch.setenv("BNSERVE_STORE_URL", url)
    assert main(argv[1:]) == 0
    ModelStore(url).dispose()
    assert main(argv[1:]) == 0  # every pod start runs it: at the schema already, nothing to do


# --- training --------------------------------------------------------------------------


def training_argv(what: str) -> list[str]:
    """The trainer's command line as the kubelet runs it, $(VAR)s expanded."""
    (container,) = dict(pod_specs())[what]["containers"]
    env = container_env(container)
    return [expand(a, env) for a in container["command"] + container.get("args", [])]


def test_cronjob_and_job_share_one_pod_spec():
    cron = one("CronJob")["spec"]["jobTemplate"]["spec"]
    job = one("Job", docs=documents(K8S / "job-train.yaml"))["spec"]
    assert cron["template"] == job["template"]
    for key in ("backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        assert cron[key] == job[key]
    assert one("CronJob")["spec"]["concurrencyPolicy"] == "Forbid"
    assert job["backoffLimit"] >= 1 and job["ttlSecondsAfterFinished"] > 0


@pytest.mark.parametrize("what", ["CronJob", "Job", "Dask Job"])
def test_training_command_parses_with_the_trainers_parser(what):
    from bnserve.trainer.cli import build_parser
    from bnserve.trainer.cli.learning import _learner_params

    argv = training_argv(what)
    assert argv[:2] == ["trainer", "fit"]
    args = build_parser().parse_args(argv[1:])  # trainer's parser raises UsageError on a bad flag
    assert "production" in args.aliases and args.name == config()["TRAIN_MODEL_NAME"]
    assert args.store is None, "the store URL comes from BNSERVE_STORE_URL (the Secret)"
    _learner_params(args)  # e.g. --k with an algorithm that takes no k is refused
    spec = dict(pod_specs())[what]
    (container,) = spec["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    if not args.data.startswith("builtin:"):
        assert any(args.data.startswith(path + "/") for path in mounts), f"{args.data} is on no volume"
    assert mounts["/data"]["readOnly"] is True
    volume = {v["name"]: v for v in spec["volumes"]}[mounts["/data"]["name"]]
    claim = volume["persistentVolumeClaim"]["claimName"]
    assert claim == one("PersistentVolumeClaim")["metadata"]["name"] == "bnserve-training-data"


def test_training_command_publishes_the_production_alias(tmp_path, monkeypatch):
    """The CronJob's command, run: it publishes a version that `production` points at."""
    from bnserve.store.db import ModelStore
    from bnserve.trainer.cli import main

    argv = training_argv("CronJob")
    if not config()["TRAIN_DATA"].startswith("builtin:"):
        pytest.skip("the training data is on the cluster's volume")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setenv("BNSERVE_STORE_URL", url)
    assert main(argv[1:]) == 0
    store = ModelStore(url)
    try:
        loaded = store.load(config()["TRAIN_MODEL_NAME"], alias="production")
        assert loaded.version == 1
    finally:
        store.dispose()


# --- the Dask cluster -------------------------------------------------------------------


def dask_container(name: str) -> dict[str, Any]:
    (container,) = dict(pod_specs())[name]["containers"]
    return container


def test_the_dask_job_is_the_training_job_with_dask_in_place_of_jobs():
    job = one("Job", docs=documents(K8S / "job-train.yaml"))
    dask_job = one("Job", docs=documents(DASK / "job-train-dask.yaml"))
    argv, dask_argv = training_argv("Job"), training_argv("Dask Job")
    at = argv.index("--jobs")
    assert dask_argv == [*argv[:at], "--dask", DASK_SCHEDULER, *argv[at + 2 :]]

    def strip(spec: dict[str, Any]) -> dict[str, Any]:
        """The pod spec without the arguments and the Dask volumes (the workers' own)."""
        containers = [
            {**c, "args": None, "volumeMounts": [m for m in c["volumeMounts"] if m["name"] not in DASK_VOLUMES]}
            for c in spec["containers"]
        ]
        return {
            **spec,
            "containers": containers,
            "volumes": [v for v in spec["volumes"] if v["name"] not in DASK_VOLUMES],
        }

    assert strip(dask_job["spec"]["template"]["spec"]) == strip(job["spec"]["template"]["spec"])
    worker = dict(pod_specs())["bnserve-dask-worker"]
    for name, path in DASK_VOLUMES.items():
        mounts = {m["name"]: m for m in dask_container("Dask Job")["volumeMounts"]}
        assert mounts[name] == {"name": name, "mountPath": path, "readOnly": True}
        volume = lambda spec: next(v for v in spec["volumes"] if v["name"] == name)  # noqa: E731
        assert volume(dask_job["spec"]["template"]["spec"]) == volume(worker), "the workers' configuration"
    assert dask_job["spec"]["template"]["metadata"] == job["spec"]["template"]["metadata"]


def test_the_trainer_and_the_workers_reach_the_scheduler_service():
    from bnserve.trainer.cli import build_parser

    service = one("Service", "bnserve-dask-scheduler", applied(DASK))
    scheduler_pods = one("Deployment", "bnserve-dask-scheduler", applied(DASK))["spec"]["template"]["metadata"]
    assert matches(service["spec"]["selector"], scheduler_pods["labels"])
    port = {p["name"]: p for p in service["spec"]["ports"]}["dask"]
    container_ports = {p["name"]: p["containerPort"] for p in dask_container("bnserve-dask-scheduler")["ports"]}
    assert port["targetPort"] == "dask" and container_ports["dask"] == port["port"] == 8786
    address = f"tls://{service['metadata']['name']}:{port['port']}"
    assert address == DASK_SCHEDULER
    assert build_parser().parse_args(training_argv("Dask Job")[1:]).dask == address
    assert dask_container("bnserve-dask-worker")["args"][0] == address
    images = {dask_container(n)["image"] for n in ("bnserve-dask-scheduler", "bnserve-dask-worker", "Dask Job")}
    assert images == {server_container()["image"]}


def _click_args(command: Any, args: list[str]) -> dict[str, Any]:
    """``args`` parsed by Dask's own command (a click command), without running it."""
    with command.make_context(command.name, list(args)) as context:
        return dict(context.params)


def test_the_dask_commands_parse_with_dasks_own_parsers_and_fit_their_limits():
    from dask.utils import parse_bytes
    from distributed.cli.dask_scheduler import main as scheduler_main
    from distributed.cli.dask_worker import main as worker_main

    scheduler = dask_container("bnserve-dask-scheduler")
    assert scheduler["command"] == ["dask", "scheduler"]
    scheduler_params = _click_args(scheduler_main, scheduler["args"])
    assert int(scheduler_params["port"]) == 8786 and scheduler_params["protocol"] == "tls"
    worker = dask_container("bnserve-dask-worker")
    assert worker["command"] == ["dask", "worker"]
    params = _click_args(worker_main, worker["args"])
    assert int(params["n_workers"]) == 1
    assert params["nthreads"] <= cpu_cores(worker["resources"]["limits"]["cpu"])
    assert parse_bytes(params["memory_limit"]) < parse_bytes(worker["resources"]["limits"]["memory"].replace("i", "iB"))
    assert params["local_directory"] == "/tmp"
    for module in params["preload"]:
        __import__(module)  # the workers import it before their first task
    mounts = {m["mountPath"]: m for m in worker["volumeMounts"]}
    assert mounts["/data"]["readOnly"] is True, "the workers read --data where the trainer does"


def test_the_network_policies_open_the_scheduler_to_the_trainer_and_nothing_else_to_the_dask_pods():
    dask_policy = one("NetworkPolicy", "bnserve-dask", applied(DASK))["spec"]
    components = lambda peer: set(peer["podSelector"]["matchExpressions"][0]["values"])  # noqa: E731
    (ingress,) = dask_policy["ingress"]
    assert components(ingress["from"][0]) == {"dask-scheduler", "dask-worker", "train"}
    train = one("NetworkPolicy", "bnserve-train")["spec"]
    to_scheduler = [rule for rule in train["egress"] if "to" in rule]
    assert [r["to"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for r in to_scheduler] == [
        "dask-scheduler"
    ]
    assert to_scheduler[0]["ports"] == [{"port": 8786, "protocol": "TCP"}]


def dask_secret(directory: Path) -> Path:
    """The Secret bnserve-dask-tls as the pods see it: ca.crt, and tls.crt with tls.key, a
    certificate that CA signed for both ends of a connection (Dask's roles share it)."""
    from tests.certificates import _ca, _signed

    directory.mkdir()
    ca = _ca(directory, "ca")
    pair = _signed(
        directory,
        ca,
        "dask",
        "/CN=bnserve-dask",
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n",
    )
    secret = directory / "secret"
    secret.mkdir()
    for name, path in (("ca.crt", ca.cert), ("tls.crt", pair.cert), ("tls.key", pair.key)):
        (secret / name).write_bytes(path.read_bytes())
    return secret


def flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} as {"a.b": 1}: dask.config.set's keys (a nested dict would replace whole sections)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_the_manifests_commands_run_a_cluster_that_trains(tmp_path, monkeypatch):
    """The scheduler's and the worker's commands as the manifests give them (the Service's
    host name made 127.0.0.1, a free port), started as processes with the mounted Dask
    configuration and certificate (the Secret's files in a folder of their own); the Dask
    Job's `trainer fit`, with the same configuration, then trains on them over TLS and
    publishes the production version."""
    import os
    import socket
    import sys

    import dask
    from distributed.security import Security

    from bnserve.store.db import ModelStore
    from bnserve.trainer.cli import main

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    local = lambda args: [a.replace("bnserve-dask-scheduler:8786", f"127.0.0.1:{port}") for a in args]  # noqa: E731
    scheduler, worker = dask_container("bnserve-dask-scheduler"), dask_container("bnserve-dask-worker")
    scheduler_args = [a if a != "8786" else str(port) for a in scheduler["args"]]
    scheduler_args[scheduler_args.index("--dashboard-address") + 1] = "127.0.0.1:0"
    dask_cli = str(Path(sys.executable).parent / "dask")
    (mount,) = [m for m in worker["volumeMounts"] if m["mountPath"] == "/etc/dask"]
    (volume,) = [v for v in dict(pod_specs())["bnserve-dask-worker"]["volumes"] if v["name"] == mount["name"]]
    dask_config = one("ConfigMap", volume["configMap"]["name"], applied(DASK))["data"]
    secret = dask_secret(tmp_path / "pki")
    (tmp_path / "dask").mkdir()
    for file, text in dask_config.items():
        (tmp_path / "dask" / file).write_text(text.replace(DASK_VOLUMES["dask-tls"], str(secret)))
    settings = flat(yaml.safe_load((tmp_path / "dask" / "dask.yaml").read_text()))
    assert settings["distributed.comm.require-encryption"] is True
    env = {**os.environ, **{e["name"]: e["value"] for e in worker["env"]}, "DASK_CONFIG": str(tmp_path / "dask")}
    env.pop("MALLOC_TRIM_THRESHOLD_", None)  # a pod starts without it (a LocalCluster may have set it here)
    procs = [
        subprocess.Popen(
            [dask_cli, *scheduler["command"][1:], *scheduler_args],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        procs.append(
            subprocess.Popen(
                [dask_cli, *worker["command"][1:], *local(worker["args"])],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        from distributed import Client

        with dask.config.set(settings):  # the Dask Job's mounted configuration
            with Client(f"tls://127.0.0.1:{port}", timeout=60, security=Security()) as client:
                client.wait_for_workers(1, timeout=60)
                trim = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
                assert list(trim.values()) == [None], "the mounted Dask config keeps the nanny's malloc trim off"
                workers = client.scheduler_info()["workers"]
                assert workers and all(address.startswith("tls://") for address in workers), workers
            url = f"sqlite:///{tmp_path / 'store.db'}"
            monkeypatch.setenv("BNSERVE_STORE_URL", url)
            assert main(local(training_argv("Dask Job"))[1:]) == 0
        store = ModelStore(url)
        try:
            assert store.load(config()["TRAIN_MODEL_NAME"], alias="production").version == 1
        finally:
            store.dispose()
    finally:
        for p in procs[::-1]:
            p.terminate()
            p.wait(timeout=30)


# --- the example PostgreSQL ----------------------------------------------------------


def example_store_url(name: str) -> Any:
    from sqlalchemy import make_url

    (secret,) = [d for d in documents(K8S / "examples" / "secret.example.yaml") if d["metadata"]["name"] == name]
    assert secret["metadata"]["namespace"] == NAMESPACE
    return make_url(secret["stringData"][STORE_SECRET_KEY])


# Each example Secret's role, as examples/postgres makes it: the owner, and the servers' reader.
EXAMPLE_ROLES = {WRITER_SECRET: "POSTGRES", STORE_SECRET: "BNSERVE_READER"}


@pytest.mark.parametrize("name", [STORE_SECRET, WRITER_SECRET])
def test_example_store_url_matches_the_example_postgres(name):
    url = example_store_url(name)
    postgres = {d["kind"]: d for d in applied(POSTGRES)}
    credentials = postgres["Secret"]["stringData"]
    role = EXAMPLE_ROLES[name]
    assert url.drivername == "postgresql+psycopg"
    assert (url.username, url.password, url.database) == (
        credentials[f"{role}_USER"],
        credentials[f"{role}_PASSWORD"],
        credentials["POSTGRES_DB"],
    )
    assert url.host == postgres["Service"]["metadata"]["name"] and url.port == 5432
    assert postgres["StatefulSet"]["spec"]["serviceName"] == postgres["Service"]["metadata"]["name"]
    pods = postgres["StatefulSet"]["spec"]["template"]["metadata"]["labels"]
    assert matches(postgres["Service"]["spec"]["selector"], pods)


def test_the_memory_limit_holds_the_request_budget_with_room_for_models():
    """The server's settings as the pod runs them (the request budget, the connections and
    the calls they may hold, the plan cache, per worker) fit the container's memory limit
    with at least MODELS_MIB to spare for the models (docs/operations.md, "Memory")."""
    from bnserve.server.cli import SERVE_ENV_FLAGS, build_parser
    from bnserve.server.config import ServeConfig
    from bnserve.server.limits import memory_floor

    models_mib = 128
    container = server_container()
    args = build_parser(environ=container_env(container)).parse_args(container.get("args", []))
    config = ServeConfig(store_url="sqlite://", **{name: getattr(args, name) for name in SERVE_ENV_FLAGS})
    limit = container["resources"]["limits"]["memory"]
    assert limit.endswith("Gi") or limit.endswith("Mi")
    limit_bytes = int(limit[:-2]) * (2**30 if limit.endswith("Gi") else 2**20)
    assert memory_floor(config) + models_mib * 2**20 <= limit_bytes
