"""The `monitoring` kustomize component, rendered into each overlay (and prod with the multi-node
trainer): the ServiceMonitors and the PodMonitor validate strictly against prometheus-operator's
CRD schemas (vendored), every monitor scrapes a port that exists on what it selects, the
trainer's metrics port is on (Job and TrainJob), and Prometheus (from its labelled namespace)
is let through the default-deny to exactly those ports, never to the vLLM servers'."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.deploy.conftest import ROOT, kubectl, render
from tests.deploy.test_k8s import (
    CRDS,
    KUBERNETES_VERSION,
    containers,
    of_kind,
    pod_labels,
    validate_custom,
)

pytestmark = pytest.mark.skipif(kubectl is None, reason="needs kubectl (the dev extra)")
MONITOR_KINDS = {"ServiceMonitor", "PodMonitor"}
PROMETHEUS_NAMESPACE = {"intraskill.io/monitoring": "true"}
SERVICES = {"registry", "evaluator", "analyst", "console"}


def with_monitoring(tmp: Path, overlay: str, *, multi_node: bool = False) -> Path:
    """A copy of the tree whose overlay also lists the monitoring component (first: the
    component must not depend on its place in the list), and the multi-node one if asked."""
    copy = tmp / overlay / "deploy"
    shutil.copytree(ROOT / "deploy", copy)
    kustomization = copy / "k8s" / "overlays" / overlay / "kustomization.yaml"
    text = kustomization.read_text()
    assert "components:\n" in text, "the overlay lists no components"
    text = text.replace("components:\n", "components:\n  - ../../components/monitoring\n", 1)
    if multi_node:
        assert "  # - ../../components/multi-node" in text
        text = text.replace("  # - ../../components/multi-node", "  - ../../components/multi-node")
    kustomization.write_text(text)
    return kustomization.parent


@pytest.fixture(scope="module", params=["dev", "prod", "prod+multi-node"])
def tree(request, tmp_path_factory) -> list[dict]:
    overlay, _, extra = request.param.partition("+")
    tmp = tmp_path_factory.mktemp("monitoring")
    return render(with_monitoring(tmp, overlay, multi_node=extra == "multi-node"))


def matches(selector: dict, labels: dict[str, str]) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items() and all(
        labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", [])
    )


def scrape_targets(docs: list[dict]) -> dict[str, tuple[dict[str, str], int]]:
    """Each monitored app: its pod labels and the container port Prometheus will scrape."""
    targets = {}
    services = of_kind(docs, "Service").values()
    workloads = [doc for doc in docs if pod_labels(doc)]
    for monitor in of_kind(docs, "ServiceMonitor").values():
        selected = [
            s for s in services if matches(monitor["spec"]["selector"], s["metadata"]["labels"])
        ]
        assert len(selected) == 1, monitor["metadata"]["name"]
        service = selected[0]
        endpoint = monitor["spec"]["endpoints"][0]
        assert endpoint["path"] == "/metrics"
        port = next(p for p in service["spec"]["ports"] if p["name"] == endpoint["port"])
        pods = [
            d
            for d in workloads
            if matches({"matchLabels": service["spec"]["selector"]}, pod_labels(d)[0])
        ]
        assert pods, f"service {service['metadata']['name']} selects no pod"
        targets[monitor["metadata"]["name"]] = (pod_labels(pods[0])[0], port["port"])
    for monitor in of_kind(docs, "PodMonitor").values():
        endpoint = monitor["spec"]["podMetricsEndpoints"][0]
        assert endpoint["path"] == "/metrics"
        pods = [d for d in workloads if matches(monitor["spec"]["selector"], pod_labels(d)[0])]
        assert pods, f"pod monitor {monitor['metadata']['name']} selects no pod"
        _, _, container = next(containers(pods[0]))
        port = next(p for p in container.get("ports", []) if p["name"] == endpoint["port"])
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        # the process listens where the port says: the trainer reads TRAINER_METRICS_PORT
        assert env.get("TRAINER_METRICS_PORT") == str(port["containerPort"])
        targets[monitor["metadata"]["name"]] = (pod_labels(pods[0])[0], port["containerPort"])
    return targets


def admitted_from_prometheus(policies: list[dict], labels: dict[str, str], port: int) -> bool:
    """Whether some policy selecting these pods admits the Prometheus namespace on `port`."""
    for policy in policies:
        if not matches(policy["spec"]["podSelector"], labels):
            continue
        for rule in policy["spec"].get("ingress", []):
            ports = {p["port"] for p in rule.get("ports", [])}
            for peer in rule.get("from", []):
                selector = peer.get("namespaceSelector")
                only_namespace = selector is not None and "podSelector" not in peer
                if only_namespace and port in ports and matches(selector, PROMETHEUS_NAMESPACE):
                    return True
    return False


def test_monitoring_renders_and_validates(tree) -> None:
    import kubernetes_validate

    assert {doc["kind"] for doc in tree} >= MONITOR_KINDS
    for doc in tree:
        if doc["kind"] in CRDS:
            validate_custom(doc)
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_monitor_schemas_reject_what_the_operator_would_not_take(tree) -> None:
    import jsonschema

    service = of_kind(tree, "ServiceMonitor")["registry"]
    pod = of_kind(tree, "PodMonitor")["trainer"]
    endpoint = pod["spec"]["podMetricsEndpoints"][0]
    for broken in (
        {**service, "spec": {**service["spec"], "endpoint": service["spec"]["endpoints"]}},
        {**pod, "spec": {"podMetricsEndpoints": [endpoint]}},  # selector is required
        {**pod, "spec": {**pod["spec"], "podMetricsEndpoints": [{**endpoint, "interval": 30}]}},
        {
            **pod,
            "spec": {
                **pod["spec"],
                "podMetricsEndpoints": [{**endpoint, "relabelings": [{"action": "kep"}]}],
            },
        },
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate_custom(broken)


def test_every_part_is_scraped_through_the_default_deny(tree) -> None:
    targets = scrape_targets(tree)
    assert set(targets) == SERVICES | {"trainer"}
    policies = list(of_kind(tree, "NetworkPolicy").values())
    for name, (labels, port) in targets.items():
        assert admitted_from_prometheus(policies, labels, port), name
    # the scrape policy admits the Prometheus namespace only, not every pod beside it
    scrape = of_kind(tree, "NetworkPolicy")["prometheus-scrape"]
    peers = [peer for rule in scrape["spec"]["ingress"] for peer in rule["from"]]
    assert all(set(peer) == {"namespaceSelector"} for peer in peers)
    # and never the policy servers: their port also serves the unauthenticated weight reloads
    for doc in tree:
        if doc["kind"] in ("StatefulSet", "Deployment") and doc["metadata"]["name"].startswith(
            "vllm-"
        ):
            assert not admitted_from_prometheus(policies, pod_labels(doc)[0], 8000), doc


def test_the_trainer_is_scraped_on_its_main_process_only(tree) -> None:
    """The PodMonitor keeps the single-node Job's pod (no completion index) and the TrainJob's
    node 0 (index 0, where torchrun puts global rank 0), and drops the other nodes' pods."""
    endpoint = of_kind(tree, "PodMonitor")["trainer"]["spec"]["podMetricsEndpoints"][0]
    (keep,) = [rule for rule in endpoint["relabelings"] if rule["action"] == "keep"]
    assert keep["sourceLabels"] == [
        "__meta_kubernetes_pod_annotation_batch_kubernetes_io_job_completion_index"
    ]
    kept = {index for index in ("", "0", "1", "2", "10") if re.fullmatch(keep["regex"], index)}
    assert kept == {"", "0"}


def test_every_monitor_carries_the_label_kube_prometheus_stack_selects(tree) -> None:
    """kube-prometheus-stack's Prometheus selects monitors by `release: <release>`; one without
    it is ignored, silently (issue 30)."""
    monitors = [doc for doc in tree if doc["kind"] in MONITOR_KINDS]
    assert monitors
    for monitor in monitors:
        assert monitor["metadata"].get("labels", {}).get("release") == "kube-prometheus-stack"


# The ports /metrics has to itself, and the API ports beside them (issue 30: the operators'
# namespace reaches the API ports, so /metrics may not be served there)
METRICS_APART = {
    "registry": (9000, 8000), "evaluator": (9100, 8100), "analyst": (9200, 8200),
    "console": (9300, 8300),
}  # fmt: skip


def peers_on(policies: list[dict], labels: dict[str, str], port: int) -> list[dict]:
    """Every peer some policy selecting these pods admits on `port` (a rule without ports
    admits every port)."""
    peers = []
    for policy in policies:
        if not matches(policy["spec"]["podSelector"], labels):
            continue
        for rule in policy["spec"].get("ingress", []):
            ports = {p["port"] for p in rule.get("ports", [])}
            if not ports or port in ports:
                peers += rule.get("from", [{}])  # no `from`: every peer
    return peers


@pytest.mark.parametrize("app", sorted(METRICS_APART))
def test_metrics_have_a_port_of_their_own_open_to_prometheus_alone(tree, app) -> None:
    """The monitor scrapes the metrics port, which the container is told to listen on; that
    port admits the Prometheus namespace and no other peer; the API port admits no rule that
    names the Prometheus namespace."""
    metrics_port, api_port = METRICS_APART[app]
    labels, scraped = scrape_targets(tree)[app]
    assert scraped == metrics_port
    (workload,) = [d for d in tree if d["kind"] == "Deployment" and d["metadata"]["name"] == app]
    (container,) = workload["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env[f"{app.upper()}_METRICS_PORT"] == str(metrics_port)
    policies = list(of_kind(tree, "NetworkPolicy").values())
    assert peers_on(policies, labels, metrics_port) == [{"namespaceSelector": {
        "matchLabels": PROMETHEUS_NAMESPACE
    }}]  # fmt: skip
    on_api = peers_on(policies, labels, api_port)
    assert on_api and not any(
        matches(peer.get("namespaceSelector", {"matchLabels": {"-": "-"}}), PROMETHEUS_NAMESPACE)
        for peer in on_api
    ), on_api
