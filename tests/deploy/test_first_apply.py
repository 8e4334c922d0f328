"""What a first `kubectl apply -k` on an empty cluster needs from the renders (issue 30): the
namespace itself under the restricted Pod Security profile, pods that the profile admits, and
GPU counts in the docs that are the ones the renders request."""

from __future__ import annotations

import re

import pytest

from tests.deploy.conftest import ROOT

DOC = ROOT / "docs" / "deploy.md"
OVERLAY_NAMESPACES = {"dev": "intraskill-dev", "prod": "intraskill"}
CLUSTER_SCOPED = {"Namespace", "PriorityClass"}


def pod_specs(docs: list[dict]):
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]
        elif doc["kind"] == "TrainingRuntime":
            for job in doc["spec"]["template"]["spec"]["replicatedJobs"]:
                yield doc["metadata"]["name"], job["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("overlay", sorted(OVERLAY_NAMESPACES))
def test_each_overlay_creates_its_namespace_under_restricted_pod_security(trees, overlay) -> None:
    (namespace,) = [doc for doc in trees[overlay] if doc["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == OVERLAY_NAMESPACES[overlay]
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    others = {
        doc["metadata"].get("namespace")
        for doc in trees[overlay]
        if doc["kind"] not in CLUSTER_SCOPED
    }
    assert others == {OVERLAY_NAMESPACES[overlay]}  # everything lands in the namespace it makes


@pytest.mark.parametrize("tree", ["dev", "prod", "prod+multi-node"])
def test_every_pod_meets_the_restricted_profile(trees, tree) -> None:
    """Pod Security's `restricted` rules (v1.33) as the admission controller applies them."""
    for name, spec in pod_specs(trees[tree]):
        pod = spec.get("securityContext", {})
        assert not any(spec.get(key) for key in ("hostNetwork", "hostPID", "hostIPC")), name
        assert not any("hostPath" in volume for volume in spec.get("volumes", [])), name
        for container in spec.get("initContainers", []) + spec["containers"]:
            context = container.get("securityContext", {})
            where = f"{name}/{container['name']}"
            assert context.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, where
            assert context.get("runAsUser", pod.get("runAsUser", 1)) != 0, where
            seccomp = context.get("seccompProfile", pod.get("seccompProfile", {}))
            assert seccomp.get("type") in ("RuntimeDefault", "Localhost"), where
            assert context.get("allowPrivilegeEscalation") is False, where
            assert context.get("privileged") is not True, where
            assert "ALL" in context.get("capabilities", {}).get("drop", []), where
            assert set(context.get("capabilities", {}).get("add", [])) <= {"NET_BIND_SERVICE"}


def documented_gpus() -> dict[str, dict[str, int]]:
    """The docs' GPU table: overlay -> workload -> GPUs (replicas x per pod), and the total."""
    text = DOC.read_text()
    table = text[text.index("| overlay | vllm-rollout |") :].split("\n\n")[0].splitlines()
    header = [cell.strip() for cell in table[0].strip("|").split("|")]
    out = {}
    for row in table[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        counts = {}
        for column, cell in zip(header[1:], cells[1:], strict=True):
            factors = [int(n) for n in re.findall(r"\d+", cell)]
            counts[column] = factors[0] * (factors[1] if len(factors) > 1 else 1)
        out[cells[0]] = counts
    return out


def rendered_gpus(docs: list[dict]) -> dict[str, int]:
    """GPUs each workload requests in a render: per pod x replicas (nodes for a TrainJob)."""
    counts: dict[str, int] = {}
    nodes = {
        doc["spec"]["runtimeRef"]["name"]: doc["spec"]["trainer"]["numNodes"]
        for doc in docs
        if doc["kind"] == "TrainJob"
    }
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet", "Job", "TrainingRuntime"):
            continue
        for name, spec in pod_specs([doc]):
            per_pod = sum(
                int(c.get("resources", {}).get("requests", {}).get("nvidia.com/gpu", 0))
                for c in spec["containers"]
            )
            if not per_pod:
                continue
            replicas = nodes.get(name, doc["spec"].get("replicas", 1))
            key = "trainer" if doc["kind"] == "TrainingRuntime" else name
            counts[key] = counts.get(key, 0) + per_pod * replicas
    return counts


def test_the_documented_gpu_counts_are_the_rendered_requests(trees) -> None:
    documented = documented_gpus()
    assert set(documented) == {"dev", "prod", "prod + multi-node"}
    for overlay, counts in documented.items():
        rendered = rendered_gpus(trees[overlay.replace(" + ", "+")])
        total = counts.pop("GPUs in all")
        assert counts == rendered, overlay
        assert total == sum(rendered.values()), overlay


def test_the_docs_say_no_other_gpu_count_for_an_overlay() -> None:
    """The overview's one-liners quote the same totals as the table."""
    text = DOC.read_text()
    totals = {overlay: counts["GPUs in all"] for overlay, counts in documented_gpus().items()}
    for overlay in ("dev", "prod"):
        line = next(
            ln for ln in text.splitlines() if ln.startswith(f"deploy/k8s/overlays/{overlay}/ ")
        )
        assert f"{totals[overlay]} GPUs" in line, line
    assert "one small GPU" not in text and "4+4" not in text
