"""Issue 30's remaining manifest items, in the renders: the cluster's names as parameters
(GPU node label, RWX storage class, gang scheduler), vllm-eval's Recreate and drain-friendly
PDB, the multi-node trainer's scheduler, backoffLimit and collective timeout, the optional RDMA
component, the app role made by registry-migrate, and who may reach which port."""

from __future__ import annotations

import json
import shutil
import tomllib

import pytest
import yaml

from tests.deploy.conftest import ROOT, render
from tests.deploy.test_first_apply import pod_specs
from tests.deploy.test_k8s import of_kind

OVERLAYS = ("dev", "prod")
GPU_WORKLOADS = {"vllm-rollout", "vllm-eval", "trainer", "intraskill-torch"}
# What the overlays' parameters.yaml say the defaults are (docs/deploy.md, "Parameters").
DEFAULTS = {
    "gpu-node-label": "nvidia.com/gpu.present",
    "gpu-node-label-value": "true",
    "rwx-storage-class": "nfs-csi",
    "gang-scheduler": "volcano",
}
CHANGED = {
    "gpu-node-label": "example.com/accelerator",
    "gpu-node-label-value": "h100",
    "rwx-storage-class": "my-rwx",
    "gang-scheduler": "my-gang-scheduler",
}


@pytest.fixture(scope="module")
def custom(tmp_path_factory) -> list[dict]:
    """prod with multi-node and rdma listed and every parameter changed, in a copy of the tree."""
    copy = tmp_path_factory.mktemp("params") / "deploy"
    shutil.copytree(ROOT / "deploy", copy)
    prod = copy / "k8s" / "overlays" / "prod"
    text = (prod / "kustomization.yaml").read_text()
    for component in ("multi-node", "rdma"):
        text = text.replace(
            f"  # - ../../components/{component}", f"  - ../../components/{component}"
        )
    (prod / "kustomization.yaml").write_text(text)
    parameters = yaml.safe_load((prod / "parameters.yaml").read_text())
    parameters["data"] = dict(CHANGED)
    (prod / "parameters.yaml").write_text(yaml.safe_dump(parameters))
    return render(prod)


def gpu_affinity(spec: dict) -> tuple[str, str, tuple[str, ...]]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    ((expression,),) = [term["matchExpressions"] for term in terms["nodeSelectorTerms"]]
    return expression["key"], expression["operator"], tuple(expression["values"])


def rwx_classes(docs: list[dict]) -> dict[str, str]:
    claims = of_kind(docs, "PersistentVolumeClaim")
    return {name: claims[name]["spec"]["storageClassName"] for name in ("checkpoints", "models")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlays_state_the_documented_defaults_and_emit_no_parameters(trees, overlay) -> None:
    parameters = yaml.safe_load(
        (ROOT / "deploy/k8s/overlays" / overlay / "parameters.yaml").read_text()
    )
    assert parameters["data"] == DEFAULTS
    assert "deploy-parameters" not in of_kind(trees[overlay], "ConfigMap")  # local-config


@pytest.mark.parametrize("tree", ["dev", "prod", "prod+multi-node"])
def test_gpu_pods_and_volumes_take_the_parameters(trees, tree) -> None:
    docs = trees[tree]
    gpu = {name: gpu_affinity(spec) for name, spec in pod_specs(docs) if name in GPU_WORKLOADS}
    assert len(gpu) == 3 and set(gpu.values()) == {("nvidia.com/gpu.present", "In", ("true",))}
    assert all(
        "nodeSelector" not in spec for name, spec in pod_specs(docs) if name in GPU_WORKLOADS
    )
    assert set(rwx_classes(docs).values()) == {"nfs-csi"}


def test_changed_parameters_reach_every_field(custom) -> None:
    gpu = {name: gpu_affinity(spec) for name, spec in pod_specs(custom) if name in GPU_WORKLOADS}
    assert set(gpu) == {"vllm-rollout", "vllm-eval", "intraskill-torch"}
    assert set(gpu.values()) == {("example.com/accelerator", "In", ("h100",))}
    assert set(rwx_classes(custom).values()) == {"my-rwx"}
    (runtime,) = of_kind(custom, "TrainingRuntime").values()
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["template"]["spec"]["schedulerName"] == "my-gang-scheduler"


@pytest.mark.parametrize("tree", ["base", "dev", "prod", "prod+multi-node"])
def test_no_provider_names_are_hard_wired(trees, tree) -> None:
    text = json.dumps(trees[tree])
    for name in ("standard-rwx", "premium-rwx", "cloud.google.com", "gke-", "efs-sc"):
        assert name not in text, name


@pytest.mark.parametrize("tree", ["dev", "prod"])
def test_vllm_eval_is_recreated_and_its_budget_lets_a_drain_through(trees, tree) -> None:
    docs = trees[tree]
    eval_server = of_kind(docs, "Deployment")["vllm-eval"]
    assert eval_server["spec"]["strategy"] == {"type": "Recreate"}
    assert eval_server["spec"]["replicas"] == 1
    budget = of_kind(docs, "PodDisruptionBudget")["vllm-eval"]["spec"]
    # one replica: anything but "one may go" blocks every drain of its node
    assert budget.get("maxUnavailable") == 1 and "minAvailable" not in budget


def test_the_multi_node_trainer_is_gang_scheduled_fails_fast_and_times_out_in_minutes(
    trees,
) -> None:
    docs = trees["prod+multi-node"]
    (runtime,) = of_kind(docs, "TrainingRuntime").values()
    assert runtime["spec"]["podGroupPolicy"] == {"volcano": {}}  # the scheduler below
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert node["template"]["spec"]["backoffLimit"] == 0  # a failed pod restarts the whole set
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "volcano" and pod["restartPolicy"] == "Never"
    config_map = next(
        c for n, c in of_kind(docs, "ConfigMap").items() if n.startswith("trainer-config")
    )
    config = tomllib.loads(config_map["data"]["trainer.toml"])
    (container,) = pod["containers"]
    probe = container["livenessProbe"]
    window = probe["initialDelaySeconds"]  # the progress probe's 90 minutes
    assert 60 <= config["collective_timeout_s"] <= 1800 < window


def test_rdma_is_an_optional_component_with_its_device_and_ipc_lock(trees, custom) -> None:
    def node_container(docs):
        (runtime,) = of_kind(docs, "TrainingRuntime").values()
        (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        return node["template"]["spec"]["template"]["spec"]["containers"][0]

    plain = node_container(trees["prod+multi-node"])
    assert "add" not in plain["securityContext"]["capabilities"]
    assert not any(r.startswith("rdma/") for r in plain["resources"]["limits"])
    with_rdma = node_container(custom)
    assert with_rdma["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["IPC_LOCK"]}
    for part in ("requests", "limits"):
        assert with_rdma["resources"][part]["rdma/rdma_shared_device_a"] == "1"
    (namespace,) = of_kind(custom, "Namespace").values()
    labels = namespace["metadata"]["labels"]  # IPC_LOCK is outside restricted and baseline
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_registry_migrate_creates_the_app_role_before_it_grants_it(trees, overlay) -> None:
    docs = trees[overlay]
    spec = of_kind(docs, "Job")["registry-migrate"]["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["command"][:2] == ["python", "/scripts/ensure_app_role.py"]
    refs = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in init["env"]}
    owner, app = refs["OWNER_DATABASE_URL"], refs["APP_DATABASE_URL"]
    assert owner["name"].startswith("registry-database-owner") and owner["key"] == "DATABASE_URL"
    assert app["name"].startswith("registry-database") and not app["name"].startswith(
        "registry-database-owner"
    )
    scripts = next(
        c for n, c in of_kind(docs, "ConfigMap").items() if n.startswith("registry-scripts")
    )
    assert "ensure_app_role.py" in scripts["data"]
    (volume,) = [v for v in spec["volumes"] if v["name"] == "scripts"]
    assert volume["configMap"]["name"].startswith("registry-scripts")


def namespace_rules(docs: list[dict], label: str) -> dict[str, set[int]]:
    """Pods (by name label) and ports that a namespace labelled `label` is admitted to."""
    admitted: dict[str, set[int]] = {}
    for policy in of_kind(docs, "NetworkPolicy").values():
        selector = policy["spec"]["podSelector"]
        names = set(selector.get("matchLabels", {}).values()) | {
            value for e in selector.get("matchExpressions", []) for value in e["values"]
        }
        for rule in policy["spec"].get("ingress", []):
            if any(
                label in peer.get("namespaceSelector", {}).get("matchLabels", {})
                for peer in rule.get("from", [])
            ):
                for name in names:
                    admitted.setdefault(name, set()).update(p["port"] for p in rule["ports"])
    return admitted


@pytest.mark.parametrize("tree", ["dev", "prod", "prod+multi-node"])
def test_the_operators_namespace_reaches_the_api_ports_only(trees, tree) -> None:
    """The operators' ingress namespace: the registry's API and the console, nothing else (no
    evaluator, analyst, trainer metrics port or vLLM pod: port-forward reaches those); no other
    namespace is admitted anywhere without the monitoring component."""
    docs = trees[tree]
    assert namespace_rules(docs, "intraskill.io/operator-ingress") == {
        "registry": {8000},
        "console": {8300},
    }
    assert namespace_rules(docs, "intraskill.io/monitoring") == {}
