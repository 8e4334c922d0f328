"""What the smoke starts: each pod of the render as its containers (init containers first), and
the failure that names one of them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from shared.apps.deploy import sandbox
from shared.apps.deploy.manifests import IMAGE_PREFIX, pod_template

# Jobs the smoke leaves out, and why (their work is the real model's, which the double replaces)
SKIPPED_JOBS = {"prepare-models": "fills the models volume for vLLM; the TEST DOUBLE loads none"}
TRAINER = "trainer"
LOG_TAIL = 25
# How an IntraSkill command says why it stops (`intraskill train run: no bank behind ...`); a
# launcher's traceback after it (torchrun's ChildFailedError) can push it out of the tail.
SAID = re.compile(r"^intraskill [a-z][\w -]*: \S")


class SmokeFailure(RuntimeError):
    """A container failed; names it and carries its log's last lines."""

    def __init__(self, container: str, reason: str, log: Path | None = None) -> None:
        said, tail = "", ""
        if log is not None and log.exists():
            lines = log.read_text(errors="replace").splitlines()
            tail = "\n".join(f"    {line}" for line in lines[-LOG_TAIL:])
            said = next((line for line in reversed(lines) if SAID.match(line)), "")
        super().__init__(
            f"{container}: {reason}"
            + (f"\n  it said: {said}" if said else "")
            + (f"\n  last log lines:\n{tail}" if tail else "")
        )
        self.container = container
        self.reason = reason


@dataclass
class Unit:
    """One container of one pod, as the smoke starts it."""

    workload: dict
    container: dict
    init: bool

    @property
    def pod(self) -> str:
        return self.workload["metadata"]["name"]

    @property
    def label(self) -> str:
        return f"{self.workload['kind']}/{self.pod}/{self.container['name']}"

    @property
    def is_postgres(self) -> bool:
        return self.container["image"].split(":")[0] in ("postgres", "docker.io/library/postgres")

    @property
    def is_job(self) -> bool:
        return self.workload["kind"] == "Job"

    @property
    def pod_spec(self) -> dict:
        return pod_template(self.workload)["spec"]

    @property
    def memory_limit(self) -> str | None:
        return self.container.get("resources", {}).get("limits", {}).get("memory")

    def user(self) -> sandbox.User:
        """The container's user: runAsUser and runAsGroup (container over pod), and fsGroup."""
        pod = self.pod_spec.get("securityContext", {})
        own = self.container.get("securityContext", {})
        uid = own.get("runAsUser", pod.get("runAsUser", 0))
        gid = own.get("runAsGroup", pod.get("runAsGroup", uid))
        groups = tuple(g for g in (pod.get("fsGroup"),) if g is not None)
        return sandbox.User(int(uid), int(gid), groups)


def pod_units(doc: dict) -> list[Unit]:
    spec = pod_template(doc)["spec"]
    units = [Unit(doc, c, True) for c in spec.get("initContainers", [])]
    return units + [Unit(doc, c, False) for c in spec["containers"]]


def plan(docs: list[dict]) -> tuple[dict[str, list[Unit]], list[str]]:
    """The pods to start (each its containers, init containers first), and what is left out
    (with why)."""
    pods: dict[str, list[Unit]] = {}
    skipped = []
    for doc in docs:
        if pod_template(doc) is None:
            continue
        name = doc["metadata"]["name"]
        if name in SKIPPED_JOBS:
            skipped.append(f"{doc['kind']}/{name} ({SKIPPED_JOBS[name]})")
            continue
        units = pod_units(doc)
        ours = all(u.container["image"].startswith(IMAGE_PREFIX) for u in units)
        if not ours and not all(u.is_postgres for u in units):
            skipped.append(f"{doc['kind']}/{name} (not an IntraSkill image)")
            continue
        pods[name] = units
    return pods, skipped
