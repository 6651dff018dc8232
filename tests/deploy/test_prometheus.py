"""deploy/prometheus and deploy/grafana: promtool's checks and unit tests, the dashboard's
JSON, and a real Prometheus scraping a real ``server serve`` with the deployed relabel
rules, recording rules and alerts.

promtool and prometheus come from Debian's ``prometheus`` package. Where they are missing
these tests skip, unless ``BNSERVE_REQUIRE_TOOLS=1`` (CI), which makes them fail.

Debian builds Prometheus without Kubernetes service discovery, so its promtool refuses
``kubernetes_sd_configs``. Everything else in the config is checked on a copy whose
discovery is replaced by static targets that carry the ``__meta_kubernetes_*`` labels
discovery would give, so the relabel rules run as they would in a cluster; the original
file is checked as it is where promtool knows Kubernetes.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.e2e.serving import BIN, free_port, run_cli, wait_serving
from tests.tools import require_tool

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = REPO / "deploy" / "prometheus"
CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULE_FILES = [PROMETHEUS_DIR / "rules" / "recording.yml", PROMETHEUS_DIR / "rules" / "alerts.yml"]
RULE_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.yml"))
DASHBOARD = REPO / "deploy" / "grafana" / "bnserve-dashboard.json"
ALERTS = {
    "BnserveDown",
    "BnserveErrorRatioHigh",
    "BnserveLatencyHigh",
    "BnserveModelReloadFailing",
    "BnserveStoreUnreachable",
}
NO_KUBERNETES_SD = "field kubernetes_sd_configs not found"
DEADLINE = 60.0


def promtool(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [require_tool("promtool"), *map(str, args)], capture_output=True, text=True, timeout=120, cwd=REPO
    )


def assert_promtool_ok(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, f"{' '.join(result.args)} failed:\n{result.stdout}{result.stderr}"


# ---------------------------------------------------------------- the scrape config

K8S_SD_BLOCK = re.compile(r"^    kubernetes_sd_configs:\n(?:      .*\n)+", re.MULTILINE)


def static_targets_config(
    directory: Path, targets: list[tuple[str, dict[str, str]]], interval: str | None = None
) -> Path:
    """Write into ``directory`` the deployed config with its Kubernetes discovery replaced
    by ``targets`` ((address, __meta_kubernetes_* labels) each), beside a copy of the
    rules directory so its relative ``rule_files`` resolve; optionally every interval
    set to ``interval``. Same job, relabel rules and rule files."""
    text = CONFIG.read_text()
    assert len(K8S_SD_BLOCK.findall(text)) == 1, "expected one kubernetes_sd_configs block in prometheus.yml"
    static = "    static_configs:\n" + "".join(
        f"      - targets: [{json.dumps(address)}]\n        labels:\n"
        + "".join(f"          {name}: {json.dumps(value)}\n" for name, value in labels.items())
        for address, labels in targets
    )
    text = K8S_SD_BLOCK.sub(lambda _: static, text)
    if interval is not None:
        for key in ("scrape_interval", "evaluation_interval"):
            text, n = re.subn(rf"^  {key}: \S+$", f"  {key}: {interval}", text, flags=re.MULTILINE)
            assert n == 1, f"expected one global {key} in prometheus.yml"
    shutil.copytree(PROMETHEUS_DIR / "rules", directory / "rules", dirs_exist_ok=True)
    path = directory / "prometheus.yml"
    path.write_text(text)
    return path


def pod_labels(name: str, scrape: str, port: int | None = None) -> dict[str, str]:
    """The discovery labels of a running pod in namespace bnserve with these annotations."""
    labels = {
        "__meta_kubernetes_namespace": "bnserve",
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_annotation_prometheus_io_scrape": scrape,
        "__meta_kubernetes_pod_annotation_prometheus_io_path": "/metrics",
    }
    if port is not None:
        labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] = str(port)
    return labels


def test_config_passes_promtool_check_with_static_targets(tmp_path):
    config = static_targets_config(tmp_path, [("10.0.0.1:50051", pod_labels("bnserve-0", "true", 9464))])
    result = promtool("check", "config", config)
    assert_promtool_ok(result)
    assert "2 rule files found" in result.stdout, result.stdout


def test_config_passes_promtool_check_as_deployed():
    """An upstream promtool must accept the file as it is. Debian's is built without
    Kubernetes service discovery (NEWS.Debian, 1.5.0) and refuses exactly that one field:
    then that must be its only complaint; the rest of the config is checked with static
    targets below, and the discovery block by ``test_config_discovers_pods_of_namespace_bnserve``."""
    result = promtool("check", "config", CONFIG)
    output = result.stdout + result.stderr
    if result.returncode != 0 and NO_KUBERNETES_SD in output:
        complaints = [line for line in output.splitlines() if re.match(r"\s+line \d+: ", line)]  # yaml's list
        assert complaints and all(NO_KUBERNETES_SD in line for line in complaints), output
        return
    assert_promtool_ok(result)


def test_config_discovers_pods_of_namespace_bnserve():
    """What promtool cannot check here: the discovery block itself."""
    text = CONFIG.read_text()
    (block,) = K8S_SD_BLOCK.findall(text)
    assert re.search(r"^      - role: pod$", block, re.MULTILINE), block
    assert re.search(r"^          names: \[bnserve\]$", block, re.MULTILINE), block
    assert re.search(r"^  - job_name: bnserve$", text, re.MULTILINE)
    assert re.search(r"^  scrape_interval: 15s$", text, re.MULTILINE)
    assert re.findall(r"^  - (rules/\S+)$", text, re.MULTILINE) == ["rules/recording.yml", "rules/alerts.yml"]


# ------------------------------------------------------------------------ the rules


def test_rules_pass_promtool_check():
    result = promtool("check", "rules", *RULE_FILES)
    assert_promtool_ok(result)


def test_rule_unit_tests_pass():
    assert RULE_TESTS, "no promtool tests in deploy/prometheus/tests"
    result = promtool("test", "rules", *RULE_TESTS)
    assert_promtool_ok(result)


def test_every_alert_has_a_firing_and_a_quiet_unit_test():
    declared = set(re.findall(r"^      - alert: (\w+)$", RULE_FILES[1].read_text(), re.MULTILINE))
    assert declared == ALERTS
    cases: dict[str, set[bool]] = {name: set() for name in ALERTS}
    lines = (PROMETHEUS_DIR / "tests" / "alerts_test.yml").read_text().splitlines()
    for i, line in enumerate(lines):
        if m := re.fullmatch(r"\s+alertname: (\w+)", line):
            expected = next(rest for rest in lines[i + 1 :] if rest.strip().startswith("exp_alerts:"))
            cases[m.group(1)].add(expected.strip() != "exp_alerts: []")
    assert all(cases[name] == {True, False} for name in ALERTS), cases


def test_promtool_failures_fail_these_tests(tmp_path):
    """The checks above rely on promtool's exit status: it is non-zero on a broken rule
    and on a failing unit test."""
    broken = tmp_path / "broken.yml"
    broken.write_text("groups:\n  - name: g\n    rules:\n      - record: x:y:z\n        expr: sum(rate(x[5m])\n")
    assert promtool("check", "rules", broken).returncode != 0
    wrong = tmp_path / "wrong_test.yml"
    wrong.write_text(
        f"rule_files: [{RULE_FILES[1]}]\ntests:\n  - interval: 1m\n    input_series: []\n"
        "    alert_rule_test:\n      - eval_time: 5m\n        alertname: BnserveDown\n        exp_alerts: []\n"
    )
    assert promtool("test", "rules", wrong).returncode != 0  # absent(up) fires: the test fails


# -------------------------------------------------------------------- the dashboard

GRAFANA_VARIABLES = {"__rate_interval": "1m", "__interval": "15s", "__range": "5m"}


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expr) of every target, Grafana variables replaced so Prometheus can
    evaluate them: $__rate_interval 1m, template variables .* (their "All")."""
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            expr = re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_VARIABLES.get(m.group(1), ".*"), target["expr"])
            exprs.append((panel["title"], expr))
    return exprs


def test_dashboard_is_valid_grafana_json():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}, panel["title"]
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"]), panel["title"]
    exprs = " ".join(expr for _, expr in dashboard_exprs())
    assert "$" not in exprs
    for needed in (
        "grpc_server_handled_total",
        "bnserve:grpc_server_errors:ratio_rate5m",
        "bnserve:grpc_server_handling_seconds:p99_rate5m",
        "bnserve_prediction_rows_total",
        "bnserve_predicted_class_rows_total",
        "bnserve_request_rows_bucket",
        "bnserve_model_info",
        "bnserve:store_reload_age:seconds",
        "bnserve_model_load_failures_total",
        "bnserve_store_poll_errors_total",
    ):
        assert needed in exprs, needed


# ------------------------------------------------- a real Prometheus, a real server


class Prometheus:
    """A ``prometheus`` process on a free loopback port, data and log in ``directory``."""

    def __init__(self, config: Path, directory: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = directory / "prometheus.log"
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [
                    require_tool("prometheus"),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={directory / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=directory,
            )

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                body = response.read()
        except urllib.error.HTTPError as error:  # a bad query: 400 with a JSON error body
            body = error.read()
        return json.loads(body)

    def query(self, expr: str) -> list[dict]:
        answer = self.get("/api/v1/query", query=expr)
        assert answer["status"] == "success", f"{expr}: {answer}"
        return answer["data"]["result"]

    def wait_for(self, what: str, condition: Callable[[], Any], timeout: float = DEADLINE) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited:\n{self.log.read_text()[-4000:]}"
            try:
                last = condition()
            except (OSError, AssertionError, KeyError, ValueError) as exc:  # not up yet, or not yet true
                last = exc
            else:
                if last:
                    return last
            time.sleep(0.25)
        raise AssertionError(f"timed out waiting for {what}; last: {last!r}\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


def values(result: list[dict]) -> list[float]:
    return [float(sample["value"][1]) for sample in result]


@pytest.fixture
def chess_server(tmp_path):
    """`trainer fit` naive Bayes on chess into a SQLite store, `server serve` on it; yields
    (process, gRPC channel, metrics port)."""
    require_tool("prometheus")  # before the slower set-up
    store = f"sqlite:///{tmp_path / 'store.db'}"
    fit = run_cli(
        "trainer",
        "fit",
        "--algo",
        "nb",
        "--data",
        "builtin:chess",
        "--name",
        "chess",
        "--alias",
        "production",
        "--store",
        store,
    )
    assert fit.returncode == 0, fit.stderr
    port, metrics_port = free_port(), free_port()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            str(BIN / "server"),
            "serve",
            "--store",
            store,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--metrics-port",
            str(metrics_port),
            "--poll-seconds",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        try:
            wait_serving(channel, timeout=DEADLINE)
        except AssertionError:
            proc.kill()
            proc.wait(timeout=10)
            raise AssertionError("server did not report SERVING:\n" + (tmp_path / "server.log").read_text()) from None
        yield proc, channel, metrics_port
    finally:
        channel.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        log.close()


def send_predictions(channel: grpc.Channel, ok_calls: int, bad_calls: int) -> None:
    from bnserve.server.api import predictor_pb2 as pb
    from bnserve.server.api import predictor_pb2_grpc
    from bnserve.trainer.data import load

    data = load("builtin:chess")
    names = [v.name for v in data.variables if v.role == "feature"]
    states = {v.name: v.states for v in data.variables}
    stub = predictor_pb2_grpc.PredictorStub(channel)
    for call in range(ok_calls):
        rows = data.X[call * 10 : (call + 1) * 10]
        instances = [pb.Instance(values={n: states[n][c] for n, c in zip(names, row)}) for row in rows]
        reply = stub.Predict(pb.PredictRequest(model="chess", instances=instances), timeout=10)
        assert len(reply.predictions) == 10
    for _ in range(bad_calls):
        with pytest.raises(grpc.RpcError) as error:
            stub.Predict(pb.PredictRequest(model="chess", instances=[pb.Instance(values={"nosuch": "f"})]), timeout=10)
        assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT


RECORDED_WHEN_HEALTHY = [
    "bnserve:grpc_requests:rate5m",
    "bnserve:grpc_server_errors:ratio_rate5m",
    "bnserve:grpc_server_handling_seconds_bucket:rate5m",
    "bnserve:grpc_server_handling_seconds:p50_rate5m",
    "bnserve:grpc_server_handling_seconds:p99_rate5m",
    "bnserve:prediction_rows:rate5m",
    "bnserve:predicted_class_rows:rate5m",
    "bnserve:request_rows:p50_rate5m",
    "bnserve:request_rows:p99_rate5m",
    "bnserve:store_reload_age:seconds",
]
# Dashboard panels with no series while the server is healthy: no version was refused.
EMPTY_WHEN_HEALTHY = {"Versions refused at load"}


def test_real_prometheus_scrapes_the_server_with_the_deployed_rules(chess_server, tmp_path):
    proc, channel, metrics_port = chess_server
    ok_calls, bad_calls = 6, 2
    # One pod that asks to be scraped on the metrics port (its discovered address has
    # the gRPC port, which the relabelling replaces), one that does not ask.
    config = static_targets_config(
        tmp_path,
        [
            ("127.0.0.1:1", pod_labels("bnserve-test-0", "true", metrics_port)),
            ("127.0.0.1:2", pod_labels("bnserve-test-1", "false", metrics_port)),
        ],
        interval="1s",
    )
    prometheus = Prometheus(config, tmp_path)
    try:
        prometheus.wait_for(
            "prometheus ready", lambda: urllib.request.urlopen(f"{prometheus.url}/-/ready", timeout=2).status == 200
        )

        # the target, relabelled as in a cluster
        targets = prometheus.wait_for(
            "the targets",
            lambda: [
                d for d in [prometheus.get("/api/v1/targets")["data"]] if d["activeTargets"] or d["droppedTargets"]
            ],
        )[0]
        (active,) = targets["activeTargets"]
        assert active["labels"] == {
            "job": "bnserve",
            "namespace": "bnserve",
            "pod": "bnserve-test-0",
            "instance": f"127.0.0.1:{metrics_port}",
        }
        assert active["scrapeUrl"] == f"http://127.0.0.1:{metrics_port}/metrics"
        assert [t["discoveredLabels"]["__meta_kubernetes_pod_name"] for t in targets["droppedTargets"]] == [
            "bnserve-test-1"
        ]
        up = prometheus.wait_for("up == 1", lambda: prometheus.query('up{job="bnserve"} == 1'))
        assert up[0]["metric"]["instance"] == f"127.0.0.1:{metrics_port}"

        # The labelled counters appear at their first increment, and rate() cannot count
        # a series' first value: one call, scraped, then the rest.
        predict = 'job="bnserve", grpc_service="bnserve.v1.Predictor", grpc_method="Predict"'
        send_predictions(channel, 1, 0)
        prometheus.wait_for(
            "the first Predict call scraped",
            lambda: prometheus.query(f'grpc_server_handled_total{{{predict}, grpc_code="OK"}}'),
        )
        send_predictions(channel, ok_calls - 1, bad_calls)
        prometheus.wait_for(
            f"{ok_calls} OK Predict calls scraped",
            lambda: (
                values(prometheus.query(f'sum(grpc_server_handled_total{{{predict}, grpc_code="OK"}})')) >= [ok_calls]
            ),
        )
        prometheus.wait_for(
            f"{bad_calls} INVALID_ARGUMENT calls scraped",
            lambda: (
                values(prometheus.query(f'sum(grpc_server_handled_total{{{predict}, grpc_code="INVALID_ARGUMENT"}})'))
                >= [bad_calls]
            ),
        )

        # the recording rules, on what was scraped after the calls
        for rule in RECORDED_WHEN_HEALTHY:
            prometheus.wait_for(f"{rule} recorded", lambda rule=rule: prometheus.query(rule))
        assert (
            values(
                prometheus.wait_for(
                    "Predict rate > 0", lambda: prometheus.query(f"bnserve:grpc_requests:rate5m{{{predict}}} > 0")
                )
            )
            != []
        )
        assert values(prometheus.query(f"bnserve:grpc_server_errors:ratio_rate5m{{{predict}}}")) == [
            0.0
        ]  # client errors only
        assert prometheus.query("bnserve:grpc_server_errors:rate5m") == []
        p99 = values(prometheus.query(f"bnserve:grpc_server_handling_seconds:p99_rate5m{{{predict}}}"))
        assert len(p99) == 1 and 0 < p99[0] <= 10, p99
        prometheus.wait_for(
            "chess rows/s > 0", lambda: prometheus.query('bnserve:prediction_rows:rate5m{model="chess"} > 0')
        )
        age = values(prometheus.query("bnserve:store_reload_age:seconds"))
        assert len(age) == 1 and age[0] < 30, age
        # health checks (wait_serving made some) are scraped but left out of the figures
        assert prometheus.query('grpc_server_handled_total{grpc_service="grpc.health.v1.Health"}')
        assert prometheus.query('bnserve:grpc_requests:rate5m{grpc_service="grpc.health.v1.Health"}') == []

        # every rule loaded and evaluated without error; nothing alerting on a healthy server
        def rules_evaluated() -> list[dict]:
            rules = [r for g in prometheus.get("/api/v1/rules")["data"]["groups"] for r in g["rules"]]
            return rules if all(r["health"] == "ok" for r in rules) else []

        rules = prometheus.wait_for("every rule evaluated", rules_evaluated)
        assert {r["name"] for r in rules if r["type"] == "alerting"} == ALERTS
        assert {r["name"] for r in rules if r["type"] == "recording"} >= set(RECORDED_WHEN_HEALTHY)
        assert prometheus.get("/api/v1/alerts")["data"]["alerts"] == []

        # every dashboard query is valid PromQL here, and has data where it should
        for title, expr in dashboard_exprs():
            answer = prometheus.get("/api/v1/query", query=expr)
            assert answer["status"] == "success", f"panel {title!r}: {expr}: {answer}"
            if title not in EMPTY_WHEN_HEALTHY:
                assert answer["data"]["result"], f"panel {title!r} has no data: {expr}"

        # the server goes away: BnserveDown goes pending (it fires after 2 minutes)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        pending = prometheus.wait_for(
            "BnserveDown pending",
            lambda: [
                a
                for a in prometheus.get("/api/v1/alerts")["data"]["alerts"]
                if a["labels"]["alertname"] == "BnserveDown" and a["state"] == "pending"
            ],
        )
        assert pending[0]["labels"]["pod"] == "bnserve-test-0"
    finally:
        prometheus.stop()
